"""Client-side measurements over ``/ws``, identical for every target.

Everything here is what a trainer sees: a WebSocket client on loopback sending
OpenEnv frames (``reset``, ``call_tool`` steps) and timing the replies.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import websockets
from websockets.asyncio.client import ClientConnection

STEP_BUDGET = 30
"""Reset a session after this many steps, to stay clear of any task's step limit."""


def cell(code: str) -> str:
    return json.dumps(
        {
            "type": "step",
            "data": {
                "type": "call_tool",
                "tool_name": "add_and_execute_code_cell",
                "arguments": {"code": code},
            },
        }
    )


FINAL = json.dumps(
    {
        "type": "step",
        "data": {"type": "call_tool", "tool_name": "final_answer", "arguments": {"answer": "0"}},
    }
)
MAKE_DF = cell("import numpy as np, pandas as pd\ndf = pd.DataFrame(np.random.rand(1000, 5))")


def _cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


async def settle(
    busy_below: float = 0.25, window_s: float = 0.5, max_wait_s: float = 60.0
) -> float:
    """Wait until the machine is quiet: busy under ``busy_below`` of its CPUs over ``window_s``.

    Each measurement starts from a server that has finished the work the previous
    one left (ending a thousand episodes takes seconds of teardown), so figures do
    not depend on their order. Returns the seconds waited.
    """
    start = time.perf_counter()
    while time.perf_counter() - start < max_wait_s:
        busy0, total0 = _cpu_times()
        await asyncio.sleep(window_s)
        busy1, total1 = _cpu_times()
        if total1 > total0 and (busy1 - busy0) / (total1 - total0) < busy_below:
            break
    return time.perf_counter() - start


def quantile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Session:
    """One WebSocket session; ``await s.send(frame)`` returns (milliseconds, reply)."""

    def __init__(self, ws_url: str, reset_frame: str) -> None:
        self.ws_url = ws_url
        self.reset_frame = reset_frame
        self.ws: ClientConnection | None = None
        self.steps = 0

    async def open(self) -> Session:
        self.ws = await websockets.connect(
            self.ws_url, max_size=None, open_timeout=120, ping_interval=None
        )
        return self

    async def send(self, frame: str) -> tuple[float, dict[str, Any]]:
        if self.ws is None:
            raise RuntimeError("Session.send before open(): await session.open() first")
        start = time.perf_counter()
        await self.ws.send(frame)
        reply = json.loads(await self.ws.recv())
        elapsed = (time.perf_counter() - start) * 1000
        if reply.get("type") == "error":
            raise RuntimeError(f"server error: {reply['data'].get('message')}")
        return elapsed, reply

    async def reset(self) -> float:
        self.steps = 0
        return (await self.send(self.reset_frame))[0]

    async def step(self, frame: str, setup: str | None = None) -> float:
        """Time one step frame, resetting first (untimed) when the step budget is used up."""
        if self.steps >= STEP_BUDGET:
            await self.reset()
            if setup:
                await self.send(setup)
        self.steps += 1
        return (await self.send(frame))[0]

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()


TURN_PAUSE_S = 0.05
"""Client think time between a turn's reply and the next reset in the paced reset samples.

Shorter than any model's turn (generating a few tokens takes longer), so the
pace is harder on the server than real training."""


async def latencies(
    ws_url: str, reset_frame: str, n_reset: int, n_step: int, n_describe: int | None
) -> dict[str, list[float]]:
    """Samples (ms) of reset, a trivial cell, and (when ``n_describe``) a ``df.describe()`` cell.

    ``reset`` times resets paced as a trainer makes them: each new episode takes
    one turn (a ``1+1`` cell) and ``TURN_PAUSE_S`` before the next reset.
    ``reset_burst`` times resets sent back to back with nothing in between, the
    worst case for a server that prepares kernels ahead (its reserve runs dry).
    """
    session = await Session(ws_url, reset_frame).open()
    try:
        await session.reset()
        out: dict[str, list[float]] = {"reset": []}
        for _ in range(n_reset):
            out["reset"].append(await session.reset())
            await session.send(cell("1+1"))
            await asyncio.sleep(TURN_PAUSE_S)
        out["reset_burst"] = [await session.reset() for _ in range(n_reset)]
        await session.reset()
        out["step"] = [await session.step(cell("1+1")) for _ in range(n_step)]
        if n_describe:
            await session.reset()
            await session.send(MAKE_DF)
            out["describe"] = [
                await session.step(cell("df.describe()"), setup=MAKE_DF) for _ in range(n_describe)
            ]
        return out
    finally:
        await session.close()


async def open_episodes(
    ws_url: str, reset_frame: str, count: int, concurrency: int = 16
) -> list[Session]:
    """``count`` live episodes, each reset and having run one small cell."""
    gate = asyncio.Semaphore(concurrency)

    async def one() -> Session:
        async with gate:
            session = await Session(ws_url, reset_frame).open()
            await session.reset()
            await session.send(cell("x = sum(range(1000))"))
            return session

    return list(await asyncio.gather(*(one() for _ in range(count))))


async def idle_pss_per_episode(
    ws_url: str, reset_frame: str, episodes: int, pss: Callable[[], float]
) -> float:
    """Extra PSS (MiB) of the server's process tree per live idle episode."""
    await asyncio.sleep(1.0)  # let episodes closed by earlier measurements finish tearing down
    before = pss()
    sessions = await open_episodes(ws_url, reset_frame, episodes)
    try:
        await asyncio.sleep(1.0)
        after = pss()
    finally:
        await asyncio.gather(*(s.close() for s in sessions))
    return (after - before) / episodes


async def max_concurrent(ws_url: str, reset_frame: str, limit: int, batch: int = 50) -> int:
    """Live episodes reached (each reset and stepped, all stepped again per round) before an
    error."""
    sessions: list[Session] = []
    try:
        while len(sessions) < limit:
            want = min(batch, limit - len(sessions))
            opened = await asyncio.gather(
                *(open_episodes(ws_url, reset_frame, 1) for _ in range(want)),
                return_exceptions=True,
            )
            sessions += [s[0] for s in opened if not isinstance(s, BaseException)]
            if any(isinstance(s, BaseException) for s in opened):
                break
            stepped = await asyncio.gather(
                *(s.send(cell("1+1")) for s in sessions), return_exceptions=True
            )
            if any(isinstance(r, BaseException) for r in stepped):
                return sum(not isinstance(r, BaseException) for r in stepped)
        return len(sessions)
    finally:
        await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)


async def grpo_batch_s(ws_url: str, reset_frame: str, clients: int = 64, cells: int = 5) -> float:
    """Wall time for ``clients`` concurrent episodes of reset + ``cells`` cells + final_answer."""

    async def episode() -> None:
        session = await Session(ws_url, reset_frame).open()
        try:
            await session.reset()
            for i in range(cells):
                await session.send(cell(f"y = {i} * 2\ny"))
            await session.send(FINAL)
        finally:
            await session.close()

    start = time.perf_counter()
    await asyncio.gather(*(episode() for _ in range(clients)))
    return time.perf_counter() - start


async def _reset_together(sessions: list[Session]) -> list[float]:
    """Every session's reset sent at the same moment; their latencies in milliseconds."""
    go = asyncio.Event()

    async def reset(session: Session) -> float:
        await go.wait()
        return await session.reset()

    pending = [asyncio.ensure_future(reset(s)) for s in sessions]
    await asyncio.sleep(0.1)
    go.set()
    return list(await asyncio.gather(*pending))


async def throughput(ws_url: str, reset_frame: str, clients: int, rounds: int) -> dict[str, float]:
    """Resets and trivial steps per second with ``clients`` sessions busy at once.

    For comparing ``serve --workers N``: the sessions spread over the workers by the
    kernel's accept queue. ``rounds`` times every session resets (all at the same
    moment) and then runs one trivial cell; the resets per second are all resets over
    the time they took, and likewise the steps.
    """
    opening = (Session(ws_url, reset_frame).open() for _ in range(clients))
    sessions = list(await asyncio.gather(*opening))
    trivial = cell("1+1")
    reset_s = step_s = 0.0
    step_ms: list[float] = []
    try:
        for _ in range(rounds):
            reset_s += max(await _reset_together(sessions)) / 1000
            start = time.perf_counter()
            replies = await asyncio.gather(*(s.send(trivial) for s in sessions))
            step_s += time.perf_counter() - start
            step_ms += [ms for ms, _ in replies]
        return {
            "resets_per_s": clients * rounds / reset_s,
            "steps_per_s": clients * rounds / step_s,
            "step_p99_ms": quantile(step_ms, 0.99),
        }
    finally:
        await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)


async def burst(
    ws_url: str, reset_frame: str, clients: int, rounds: int, settle_max_s: float = 60.0
) -> dict[str, float]:
    """Figures of ``clients`` sessions acting at once, as a trainer's batch does.

    ``clients`` sockets are opened first (untimed). Then every one sends its reset at
    the same moment: ``burst_reset_p50_ms``/``p99`` (the observation the model needs to
    start writing). Then, when all have answered, every one sends its first trivial cell
    at once: ``burst_first_step_p50_ms``/``p99`` (it waits for a kernel still starting,
    so it shows what the reset did not wait for; a trainer's model writes for seconds
    before it). Then every one runs ``rounds`` more trivial cells back to back, all
    sessions at once: ``burst_step_p50_ms``/``p99`` and the server's throughput
    ``burst_steps_per_s`` (all those steps over their wall time). Then, once the machine
    is quiet again (as it is while a trainer's model writes), all reset together once
    more, as the next training step does: ``burst_again_reset_p50_ms``/``p99`` (each
    reset also ends the session's episode).
    """
    opening = (Session(ws_url, reset_frame).open() for _ in range(clients))
    sessions = list(await asyncio.gather(*opening))
    try:
        resets = await _reset_together(sessions)
        trivial = cell("1+1")
        first = [ms for ms, _ in await asyncio.gather(*(s.send(trivial) for s in sessions))]

        async def steps(session: Session) -> list[float]:
            return [(await session.send(trivial))[0] for _ in range(rounds)]

        start = time.perf_counter()
        per_session = await asyncio.gather(*(steps(s) for s in sessions))
        wall = time.perf_counter() - start
        step_ms = [ms for samples in per_session for ms in samples]
        await settle(max_wait_s=settle_max_s)
        again = await _reset_together(sessions)
        return {
            "burst_reset_p50_ms": statistics.median(resets),
            "burst_reset_p99_ms": quantile(resets, 0.99),
            "burst_first_step_p50_ms": statistics.median(first),
            "burst_first_step_p99_ms": quantile(first, 0.99),
            "burst_step_p50_ms": statistics.median(step_ms),
            "burst_step_p99_ms": quantile(step_ms, 0.99),
            "burst_steps_per_s": len(step_ms) / wall,
            "burst_again_reset_p50_ms": statistics.median(again),
            "burst_again_reset_p99_ms": quantile(again, 0.99),
        }
    finally:
        await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)
