"""The soak's clients: episodes of random valid and invalid actions, every frame owed a reply.

Each client plays episodes on one socket each: valid cells, SQL, file listings,
and everything a clumsy or hostile client does (binary and malformed frames,
unknown tools and wrong arguments, cells that crash the kernel, loop past the
cell timeout or eat memory, connections dropped mid-step and resumed, or dropped
for good). What they did and every frame left without a reply go into a
:class:`Tally`, which :mod:`~analyst_env.benchmarks.soak` turns into its report.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass, field
from typing import Any

import websockets

from analyst_env.client.resume import Backoff, EpisodeLostError, ResumeTicket, resume_episode

TASK_ID = "starter-sales-000"
RESUME_GRACE_S = 5.0
REPLY_TIMEOUT_S = 60.0


@dataclass
class Tally:
    """What the clients did and saw."""

    episodes: int = 0
    frames: int = 0
    actions: dict[str, int] = field(default_factory=dict)
    unanswered: int = 0
    problems: list[str] = field(default_factory=list)

    def did(self, action: str) -> None:
        self.actions[action] = self.actions.get(action, 0) + 1

    def problem(self, text: str) -> None:
        self.unanswered += 1
        if len(self.problems) < 20:
            self.problems.append(text)


def _step(tool: str, **arguments: Any) -> str:
    return json.dumps(
        {"type": "step", "data": {"type": "call_tool", "tool_name": tool, "arguments": arguments}}
    )


def _cell(code: str) -> str:
    return _step("add_and_execute_code_cell", code=code)


#: Actions that keep the connection: (name, frame). Every one must get a reply frame.
ACTIONS: list[tuple[str, Any]] = [
    ("trivial_cell", _cell("1 + 1")),
    ("pandas_cell", _cell("import pandas as pd\npd.read_csv('sales.csv').describe()")),
    ("list_files", _step("list_files")),
    ("notebook_state", _step("get_notebook_state")),
    ("shell", _step("execute_shell_command", command="ls -la")),
    ("state", json.dumps({"type": "state"})),
    ("crash_cell", _cell("raise RuntimeError('boom')")),
    ("kill_kernel_cell", _cell("import os\nos._exit(3)")),
    ("loop_cell", _cell("while True:\n    pass")),
    ("memory_cell", _cell("blocks = []\nwhile True:\n    blocks.append(bytearray(64 * 2**20))")),
    ("unknown_tool", _step("no_such_tool")),
    ("wrong_arguments", _step("add_and_execute_code_cell", code=7, extra=True)),
    ("malformed_json", "{not json"),
    ("json_array", "[1, 2, 3]"),
    ("unknown_type", json.dumps({"type": "teleport"})),
    ("binary_frame", b"\x00\x01binary"),
    ("deep_nesting", "[" * 5000 + "]" * 5000),
    ("huge_seed_reset", '{"type": "reset", "data": {"seed": 1' + "0" * 5000 + "}}"),
]
#: Actions that end or cut the connection.
CUTS = ("drop_and_resume", "drop_for_good", "close")


async def _reply(ws) -> dict[str, Any]:
    return json.loads(await asyncio.wait_for(ws.recv(), timeout=REPLY_TIMEOUT_S))


async def _episode(
    ws_url: str, rng: random.Random, steps: int, tally: Tally, deadline: float
) -> None:
    """One episode of random actions (one socket, resumed as often as it is dropped)."""
    ws = await websockets.connect(
        f"{ws_url}?resume=1", max_size=None, ping_interval=None, open_timeout=REPLY_TIMEOUT_S
    )
    cut_off = False
    try:
        try:
            await ws.send(json.dumps({"type": "reset", "data": {"task_id": TASK_ID}}))
        except websockets.ConnectionClosed:
            pass  # refused (error frame, then close): the frame is still queued
        first = await _reply(ws)
        if (first.get("data") or {}).get("code") == "CAPACITY_REACHED":
            tally.did("refused_at_capacity")  # a clear refusal, not a fault
            cut_off = True
            await asyncio.sleep(0.5)
            return
        if first.get("type") != "observation":
            tally.problem(f"reset failed: {str(first)[:200]}")
            return
        tally.episodes += 1
        meta = first["data"].get("metadata") or {}
        episode_id = first["data"]["observation"]["episode_id"]
        secret, steps_seen = meta.get("resume_secret"), 0
        if not isinstance(secret, str):  # asked for with ?resume=1: without it no cut can resume
            tally.problem(f"reset reply without a resume_secret: {str(first)[:200]}")
            return
        for _ in range(steps):
            if time.monotonic() > deadline:
                break
            if rng.random() < 0.12:
                cut = rng.choice(CUTS)
                tally.did(cut)
                if cut == "close":
                    break
                if cut == "drop_for_good":  # parked, then closed when the grace period ends
                    ws.transport.abort()
                    cut_off = True
                    return
                await ws.send(_cell("import time\ntime.sleep(0.3)\n'resumed'"))
                ws.transport.abort()  # mid-step
                resumed = await _resume(ws_url, episode_id, secret, steps_seen, tally)
                if resumed is None:
                    cut_off = True
                    return
                ws, ran = resumed
                steps_seen += ran
                continue
            name, frame = rng.choice(ACTIONS)
            tally.did(name)
            await ws.send(frame)
            try:
                reply = await _reply(ws)
            except (TimeoutError, websockets.ConnectionClosed) as exc:
                tally.problem(f"{name}: no reply ({exc!r})")
                return
            tally.frames += 1
            if name.startswith(
                (
                    "trivial",
                    "pandas",
                    "list",
                    "notebook",
                    "shell",
                    "crash",
                    "kill",
                    "loop",
                    "memory",
                    "unknown_tool",
                    "wrong",
                )
            ):
                steps_seen += 1
            if name == "huge_seed_reset" and reply.get("type") == "observation":
                tally.problem("a reset with a 5000-digit seed was accepted")
    finally:
        if not cut_off:
            try:
                await ws.send(json.dumps({"type": "close"}))
                await asyncio.wait_for(ws.close(), timeout=5)
            except (TimeoutError, websockets.ConnectionClosed, OSError):
                ws.transport.abort()


async def _resume(ws_url: str, episode_id: str, secret: str, seen: int, tally: Tally):
    """(socket resumed on the episode, whether the cut step's reply came first), or None."""
    ticket = ResumeTicket(episode_id, secret, RESUME_GRACE_S, seen)
    try:
        ws, missed = await resume_episode(
            ws_url,
            ticket,
            {"max_size": None, "ping_interval": None},
            time.monotonic(),
            Backoff(),
            REPLY_TIMEOUT_S,
        )
    except EpisodeLostError as exc:
        tally.problem(f"resume failed: {exc}")
        return None
    # No missed reply: the step frame died with the aborted connection before reaching the server.
    tally.did("resumed_with_missed_reply" if missed is not None else "resumed_step_never_arrived")
    return ws, missed is not None


async def _client(
    ws_url: str, rng: random.Random, steps: int, tally: Tally, deadline: float
) -> None:
    while time.monotonic() < deadline:
        try:
            await _episode(ws_url, rng, steps, tally, deadline)
        except (
            TimeoutError,
            OSError,
            websockets.ConnectionClosed,
            websockets.InvalidHandshake,
        ) as exc:
            tally.problem(f"connection failed: {exc!r}")


def run_clients(
    ws_url: str, rng: random.Random, sessions: int, steps: int, tally: Tally, seconds: float
) -> None:
    """Run ``sessions`` random clients, ``steps`` actions an episode at most, for ``seconds``."""
    deadline = time.monotonic() + seconds

    async def run() -> None:
        await asyncio.gather(
            *(
                _client(ws_url, random.Random(rng.random()), steps, tally, deadline)
                for _ in range(sessions)
            )
        )

    asyncio.run(run())
