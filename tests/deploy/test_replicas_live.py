"""Live: three ``analyst-env serve`` replicas behind HAProxy, one killed mid-run (issue 18).

HAProxy runs the shipped ``deploy/compose/haproxy.cfg`` (``haproxy_process.py``) in
front of three real server processes. 300 WebSocket sessions open through it, each
resets and runs a trivial cell, and stay open: least-connections balancing must
spread them over all three. Then, while every session on replica ``r0`` runs a
cell, ``r0`` is killed with SIGKILL. Its sessions must get a closed connection
(not a hang, not a reply from another replica's episode); the sessions on the
survivors go on; HAProxy marks ``r0`` down and every new session lands on a
survivor. Nothing of ``r0`` may stay behind: its kernel and zygote processes die with
it, it left no mount on the host and no file in its scratch directory (only empty
folders, which go with a container), and the replica started in its place (as an
orchestrator restarts it) sweeps its cgroups and serves through the balancer again.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import shutil
import signal
from pathlib import Path

import httpx
import pytest
from deploy.balanced_sessions import Session, cell, reply
from deploy.haproxy_process import HAProxyProcess
from deploy.polling import wait_for
from server.serve_process import ServeProcess

from analyst_env.benchmarks.servers import process_tree

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        shutil.which("haproxy") is None,
        reason="haproxy is not installed (.ci/run installs it with apt-get)",
    ),
]

SESSIONS = 300


def start_time(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except OSError:
        return None


def descendants(root: int) -> set[tuple[int, str]]:
    """``(pid, start time)`` of every process below ``root`` (start times tell pid reuse apart)."""
    return {(pid, start) for pid in process_tree(root)[1:] if (start := start_time(pid))}


def still_running(processes: set[tuple[int, str]]) -> set[tuple[int, str]]:
    left = set()
    for pid, start in processes:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[19] == start and fields[0] != "Z":
            left.add((pid, start))
    return left


def cgroups_of(pid: int) -> list[str]:
    """The cgroup directories a local backend of server ``pid`` made (``analyst-env-<pid>-*``)."""
    return [str(p) for p in Path("/sys/fs/cgroup").glob(f"**/analyst-env-{pid}-*") if p.is_dir()]


def test_three_replicas_spread_sessions_and_survive_losing_one(tmp_path):
    args = ("--max-sessions", "160", "--log-level", "warning")
    replicas = [ServeProcess(tmp_path / f"r{i}", *args) for i in range(3)]
    for replica in replicas:
        replica.root.mkdir()
        replica.__enter__()
    try:
        with HAProxyProcess(tmp_path, [r.port for r in replicas]) as balancer:
            run_scenario(balancer, replicas)
    finally:
        for replica in replicas:
            replica.__exit__(None, None, None)


def run_scenario(balancer: HAProxyProcess, replicas: list[ServeProcess]) -> None:
    ws_url = balancer.url.replace("http://", "ws://") + "/ws"
    victim = replicas[0]
    victim_tree = descendants(victim.proc.pid)
    assert victim_tree, "the replica's zygote and standby kernels are its child processes"
    victim_cgroups = cgroups_of(victim.proc.pid)
    assert victim_cgroups or os.geteuid() != 0, "as root the replica limits episodes by cgroups"

    async def scenario() -> None:
        gate = asyncio.Semaphore(24)

        async def opened() -> Session:
            async with gate:
                return await Session.open(ws_url)

        sessions = await asyncio.gather(*(opened() for _ in range(SESSIONS)))
        spread = collections.Counter(s.replica for s in sessions)
        assert set(spread) == {"r0", "r1", "r2"} and min(spread.values()) >= SESSIONS // 6, spread

        on_victim = [s for s in sessions if s.replica == "r0"]
        survivors = [s for s in sessions if s.replica != "r0"]
        for s in on_victim:  # mid-run: every session of r0 has a cell running when it dies
            await s.ws.send(cell("import time\ntime.sleep(3)\nprint('never')"))
        await asyncio.sleep(0.5)
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait(timeout=30)

        outcomes = await asyncio.gather(*(s.lost() for s in on_victim))
        assert all(o.startswith("closed") for o in outcomes), collections.Counter(outcomes)

        async def still_served(s: Session) -> str:
            await s.ws.send(cell("print(40 + 2)"))
            return json.dumps(await reply(s.ws))

        results = await asyncio.gather(*(still_served(s) for s in survivors))
        assert all("42" in r for r in results)

        await asyncio.to_thread(
            wait_for,
            lambda: balancer.server_states().get("r0") == "DOWN",
            30,
            "haproxy did not mark the killed replica down",
        )
        fresh = await asyncio.gather(*(opened() for _ in range(30)))
        assert {s.replica for s in fresh} <= {"r1", "r2"}
        for s in [*survivors, *fresh]:
            await s.ws.close()

    asyncio.run(scenario())

    wait_for(
        lambda: not still_running(victim_tree),
        30,
        f"processes of the killed replica survive it: {still_running(victim_tree)}",
    )
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(victim.scratch) not in mounts and str(victim.root) not in mounts
    # A SIGKILL leaves the backend's scratch directory, but nothing in it: empty folders only.
    assert not [p for p in victim.scratch.rglob("*") if not p.is_dir()]

    # The replica restarted on the same port sweeps what the killed one left and serves again.
    replacement = ServeProcess(victim.root / "restarted", "--max-sessions", "160")
    replacement.root.mkdir()
    replacement.port, replacement.url = victim.port, victim.url
    with replacement:
        assert not [p for p in victim_cgroups if os.path.isdir(p)], "stale cgroups not swept"
        wait_for(
            lambda: balancer.server_states().get("r0") == "UP",
            30,
            "the restarted replica did not rejoin the balancer",
        )

        async def lands_everywhere() -> set[str]:
            opened = [await Session.open(ws_url) for _ in range(6)]
            for s in opened:
                await s.ws.close()
            return {s.replica for s in opened}

        assert "r0" in asyncio.run(lands_everywhere())
    for survivor in replicas[1:]:
        assert httpx.get(f"{survivor.url}/ready").status_code == 200
