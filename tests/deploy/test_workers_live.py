"""Live: ``analyst-env serve --workers 2``: two server processes on one port (issue 18).

Both workers must accept connections on the one port, each with its own sandbox
backend and a slot-uid range disjoint from the other's. Episodes opened through
the port must be counted by ``/metrics`` as one server (the counters and the
live-session gauge summed over the workers, whichever worker answers the scrape),
record their trajectories in the one state directory the ``/web`` replay reads, and
on SIGTERM to the supervisor both workers drain and everything exits 0 with no
process left behind.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time

import httpx
import pytest
import websockets
from deploy.polling import wait_for
from prometheus_client.parser import text_string_to_metric_families
from server.serve_process import ServeProcess
from support import alive

from analyst_env.benchmarks.servers import process_tree

pytestmark = pytest.mark.live

SESSIONS = 12
TASK = "starter-sales-000"


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def uid_ranges_seen(url: str, tries: int = 40) -> set[str]:
    """The slot-uid ranges reported by ``/sandbox`` over ``tries`` new connections."""
    seen = set()
    for _ in range(tries):
        with httpx.Client() as client:  # a new connection: the kernel picks a worker
            protections = client.get(f"{url}/sandbox", timeout=10).json()["protections"]
            seen.add(protections.get("uid_range"))
    return seen


def worker_pids(supervisor: int) -> list[int]:
    """The supervisor's children that serve on its socket (``--listen-fd``)."""
    found = []
    for pid in process_tree(supervisor)[1:]:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"--listen-fd" in f.read():
                    found.append(pid)
        except OSError:
            continue
    return found


def at_least(items, count: int):
    """``items`` if it holds ``count`` of them, else None (for ``wait_for``)."""
    return items if len(items) >= count else None


def test_two_workers_share_the_port_and_count_as_one_server(tmp_path):
    with ServeProcess(
        tmp_path, "--workers", "2", "--max-sessions", "20", "--log-level", "warning"
    ) as server:
        supervisor = server.proc.pid
        workers = wait_for(lambda: at_least(worker_pids(supervisor), 2), 60, "two workers")
        ranges = wait_for(
            lambda: at_least(uid_ranges_seen(server.url), 2),
            60,
            "both workers must accept connections on the port",
        )
        if None not in ranges:  # `full` isolation: per-slot uids from disjoint ranges
            (a0, a1), (b0, b1) = sorted(tuple(map(int, r.split("-"))) for r in ranges)
            assert a1 < b0, f"overlapping uid ranges {ranges}"

        ws_url = server.url.replace("http://", "ws://") + "/ws"

        async def episodes():
            socks = []
            for _ in range(SESSIONS):
                ws = await websockets.connect(ws_url, open_timeout=60)
                await ws.send(json.dumps({"type": "reset", "data": {"task_id": TASK}}))
                assert json.loads(await ws.recv())["type"] == "observation"
                socks.append(ws)
            await asyncio.sleep(1.5)  # each worker publishes its gauges every second
            summed = [scrape(server.url)[("analyst_env_sessions_live", ())] for _ in range(6)]
            for ws in socks:
                await ws.close()
            return summed

        live = asyncio.run(episodes())
        assert live == [SESSIONS] * 6, f"every scrape, whichever worker, sums both: {live}"
        totals = scrape(server.url)
        assert totals[("analyst_env_resets_total", (("status", "ready"),))] == SESSIONS
        assert totals[("analyst_env_sessions_max", ())] == 40, "20 per worker"
        wait_for(
            lambda: scrape(server.url)[("analyst_env_sessions_live", ())] == 0,
            10,
            "the gauge follows the closed sessions",
        )
        recorded = tmp_path / "state" / "trajectories"
        wait_for(
            lambda: at_least(list(recorded.glob("*.jsonl")), SESSIONS),
            10,
            "one trajectory per episode, in the one state directory",
        )
        for _ in range(4):  # the /web replay of either worker lists every worker's episodes
            with httpx.Client() as client:
                listed = client.get(f"{server.url}/web/api/trajectories", timeout=10).json()
            assert listed["total"] == SESSIONS

        tree = process_tree(supervisor)
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=60) == 0
        log = server.log()
    assert "Traceback" not in log, log[-3000:]
    assert len(workers) == 2
    time.sleep(0.5)
    left = [p for p in tree if alive(p)]
    assert not left, f"processes left after the supervisor exited: {left}"


def test_a_worker_that_dies_stops_the_others_and_the_supervisor_fails(tmp_path):
    with ServeProcess(tmp_path, "--workers", "2", "--log-level", "warning") as server:
        supervisor = server.proc.pid
        workers = wait_for(lambda: at_least(worker_pids(supervisor), 2), 60, "two workers")
        tree = process_tree(supervisor)
        os.kill(workers[0], signal.SIGKILL)
        assert server.proc.wait(timeout=60) == 1, "the process manager must see a failure"
        wait_for(lambda: not [p for p in tree if alive(p)], 60, "the other worker must stop")
        log = server.log()
    assert f"worker {workers[0]} exited with -9; stopping the others" in log


def test_workers_of_a_killed_supervisor_drain_and_exit(tmp_path):
    with ServeProcess(tmp_path, "--workers", "2", "--log-level", "warning") as server:
        supervisor = server.proc.pid
        wait_for(lambda: at_least(uid_ranges_seen(server.url, tries=10), 1), 60, "a worker")
        tree = wait_for(lambda: at_least(process_tree(supervisor), 5), 60, "workers and zygotes")
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(timeout=10)
        wait_for(
            lambda: not [p for p in tree if alive(p)],
            60,
            "the workers must drain and exit when their supervisor is killed",
        )
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{server.url}/health", timeout=5)
