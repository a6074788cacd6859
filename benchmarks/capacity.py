"""Capacity figures for planning (docs/capacity.md): memory and CPU per episode of one server.

``python -m analyst_env.benchmarks.capacity --json capacity.json`` starts one
``analyst-env serve`` (as ``analyst-env bench`` does) and measures, from procfs of
its whole process tree (server, zygote, kernels):

* ``idle_pss_mib``: extra PSS per live episode that ran one small cell;
* ``busy_pss_mib``: extra PSS per live episode holding a 200,000-row DataFrame
  (five numeric columns, ~8 MB of data) after ``describe()``;
* ``cpu_ms_per_step``: server-side CPU per trivial cell with ``--clients`` sessions
  stepping at once, and ``steps_per_core_s`` = 1000 / that; of it,
  ``server_process_cpu_ms_per_step`` is the server's own process (protocol, tools,
  rendering, records) and the rest the zygote and kernels (the cell itself);
* ``cpu_ms_per_episode``: server-side CPU per episode of reset + one cell + close
  (standby fork, isolation, teardown included), and ``episodes_per_core_s``.

CPU is counted for the server's tree only (the driver's own CPU is not), so the
per-core figures hold on a machine the driver does not share.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path

from analyst_env.benchmarks.measure import (
    Session,
    cell,
    idle_pss_per_episode,
    open_episodes,
    settle,
)
from analyst_env.benchmarks.servers import analyst_server, process_tree

RESET = json.dumps({"type": "reset", "data": {"task_id": "starter-sales-000"}})
BUSY = (
    "import numpy as np, pandas as pd\n"
    "big = pd.DataFrame(np.random.default_rng(0).random((200_000, 5)), columns=list('abcde'))\n"
    "big.describe()"
)
_TICKS = os.sysconf("SC_CLK_TCK")


def tree_cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid``'s tree, reaped children included."""
    return sum(process_cpu_s(p, reaped=True) for p in process_tree(pid))


def process_cpu_s(pid: int, reaped: bool = False) -> float:
    """User + system CPU seconds of ``pid`` alone (and of its reaped children if ``reaped``)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # utime, stime, then cutime, cstime
    return sum(int(v) for v in fields[11 : 15 if reaped else 13]) / _TICKS


async def busy_pss_per_episode(ws_url: str, episodes: int, pss) -> float:
    await asyncio.sleep(1.0)
    before = pss()
    sessions = await open_episodes(ws_url, RESET, episodes, concurrency=8)
    try:
        for s in sessions:
            await s.send(cell(BUSY))
        await asyncio.sleep(1.0)
        after = pss()
    finally:
        await asyncio.gather(*(s.close() for s in sessions))
    return (after - before) / episodes


async def cpu_per_step_ms(
    ws_url: str, pid: int, clients: int, duration_s: float
) -> tuple[float, float, float]:
    """(server tree CPU ms per trivial cell, the server process's own share, wall steps/s)
    with ``clients`` sessions stepping."""
    sessions = await open_episodes(ws_url, RESET, clients)
    steps = 0
    try:
        await settle()
        cpu0, own0 = tree_cpu_s(pid), process_cpu_s(pid)
        end = time.monotonic() + duration_s

        async def loop(s: Session) -> None:
            nonlocal steps
            while time.monotonic() < end:
                await s.step(cell("1+1"))
                steps += 1

        await asyncio.gather(*(loop(s) for s in sessions))
        cpu, own = tree_cpu_s(pid) - cpu0, process_cpu_s(pid) - own0
    finally:
        await asyncio.gather(*(s.close() for s in sessions))
    return 1000 * cpu / steps, 1000 * own / steps, steps / duration_s


async def cpu_per_episode_ms(ws_url: str, pid: int, clients: int, duration_s: float) -> float:
    """Server CPU ms per episode of reset + one cell + close, teardown and refill included."""
    episodes = 0
    await settle()
    cpu0, end = tree_cpu_s(pid), time.monotonic() + duration_s

    async def loop() -> None:
        nonlocal episodes
        while time.monotonic() < end:
            s = await Session(ws_url, RESET).open()
            await s.reset()
            await s.send(cell("1+1"))
            await s.close()
            episodes += 1

    await asyncio.gather(*(loop() for _ in range(clients)))
    await settle()  # the last teardowns and standby refills belong to these episodes
    return 1000 * (tree_cpu_s(pid) - cpu0) / episodes


def measure(idle: int, busy: int, clients: int, duration_s: float) -> dict[str, float]:
    with analyst_server(max(idle, busy, clients) + 8) as server:
        ws_url = server.ws_url
        assert server.proc is not None
        pid = server.proc.pid

        async def all_figures() -> dict[str, float]:
            out = {
                "idle_pss_mib": await idle_pss_per_episode(ws_url, RESET, idle, server.pss_mib),
                "busy_pss_mib": await busy_pss_per_episode(ws_url, busy, server.pss_mib),
            }
            step_ms, own_ms, steps_s = await cpu_per_step_ms(ws_url, pid, clients, duration_s)
            out.update(
                cpu_ms_per_step=step_ms,
                server_process_cpu_ms_per_step=own_ms,
                steps_per_core_s=1000 / step_ms,
                wall_steps_s=steps_s,
            )
            episode_ms = await cpu_per_episode_ms(ws_url, pid, clients, duration_s)
            out.update(cpu_ms_per_episode=episode_ms, episodes_per_core_s=1000 / episode_ms)
            out["server_pss_mib_after"] = server.pss_mib()
            return out

        return asyncio.run(all_figures())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=int, default=100, help="Idle episodes weighed (default 100)")
    parser.add_argument("--busy", type=int, default=30, help="Busy episodes weighed (default 30)")
    parser.add_argument("--clients", type=int, default=16, help="Sessions stepping at once")
    parser.add_argument("--duration", type=float, default=10.0, help="Seconds per CPU measurement")
    parser.add_argument("--json", help="Write the figures here")
    args = parser.parse_args(argv)
    figures = measure(args.idle, args.busy, args.clients, args.duration)
    for name, value in figures.items():
        print(f"{name:32} {value:10.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
