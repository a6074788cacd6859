"""Start a server under test as its own process, time its cold start, weigh its memory.

Each target (analyst_env, the Jupyter baseline, the protocol floor) runs in a
fresh process so that start-up time is a real cold start and the memory of its
whole process tree (server, zygote, kernels) can be read from procfs alone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from analyst_env.server.local_server import free_port


def _children(pid: int) -> list[int]:
    """Children of every thread of ``pid`` (a process started from a worker thread is that thread's
    child)."""
    found: list[int] = []
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            found += [int(p) for p in children.read_text().split()]
        except OSError:
            continue
    return found


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants."""
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(_children(current))
    return tree


def tree_pss_mib(pid: int) -> float:
    """Proportional set size of the whole process tree under ``pid``, in MiB."""
    total_kib = 0
    for p in process_tree(pid):
        try:
            for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total_kib += int(line.split()[1])
                    break
        except OSError:
            continue
    return total_kib / 1024


class ServerProcess:
    """``with ServerProcess(argv) as server:`` runs ``argv`` (with ``{port}`` filled in) until the
    block ends."""

    def __init__(
        self, argv: list[str], env: dict[str, str] | None = None, timeout_s: float = 120
    ) -> None:
        self.port = free_port()
        self.argv = [a.replace("{port}", str(self.port)) for a in argv]
        self.env = {**os.environ, **(env or {})}
        self.timeout_s = timeout_s
        self.cold_start_s: float | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        """The server's OpenEnv WebSocket endpoint (``/ws``)."""
        return f"ws://127.0.0.1:{self.port}/ws"

    @property
    def running(self) -> subprocess.Popen[bytes]:
        """The server's process, which exists only inside the ``with`` block."""
        if self.proc is None:
            raise RuntimeError(f"server {self.argv} is not started: use `with ServerProcess(...)`")
        return self.proc

    def __enter__(self) -> ServerProcess:
        start = time.perf_counter()
        self.proc = subprocess.Popen(
            self.argv,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        deadline = start + self.timeout_s
        while True:
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.perf_counter() > deadline:
                err = (
                    self.proc.stderr.read().decode(errors="replace")[-2000:]
                    if self.proc.stderr
                    else ""
                )
                raise RuntimeError(f"server {self.argv} did not become healthy: {err}")
            time.sleep(0.01)
        self.cold_start_s = time.perf_counter() - start
        return self

    def pss_mib(self) -> float:
        return tree_pss_mib(self.running.pid)

    def __exit__(self, *exc) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGINT)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def analyst_server(
    max_sessions: int,
    env: dict[str, str] | None = None,
    workers: int = 1,
    flags: tuple[str, ...] = (),
) -> ServerProcess:
    """``analyst-env serve`` on a free port, logging warnings only; ``flags`` are more
    ``serve`` options."""
    exe = str(Path(sys.executable).with_name("analyst-env"))
    argv = [
        exe,
        "serve",
        "--port",
        "{port}",
        "--max-sessions",
        str(max_sessions),
        *flags,
        "--workers",
        str(workers),
        "--log-level",
        "warning",
    ]
    return ServerProcess(argv, env=env)


def baseline_server(factory: str, max_sessions: int, csv_path: str | None) -> ServerProcess:
    argv = [
        sys.executable,
        "-m",
        "uvicorn",
        "--factory",
        f"analyst_env.benchmarks.baselines:{factory}",
        "--port",
        "{port}",
        "--log-level",
        "warning",
        "--ws-max-size",
        str(100 * 2**20),
    ]
    env = {"BASELINE_MAX_SESSIONS": str(max_sessions)}
    if csv_path:
        env["BASELINE_TASK_CSV"] = csv_path
    return ServerProcess(argv, env=env)


def import_time_s(statement: str, runs: int = 3) -> float:
    """Median wall time of ``python -c statement`` in a fresh interpreter, minus bare start-up."""

    def once(code: str) -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        return time.perf_counter() - start

    bare = sorted(once("pass") for _ in range(runs))[runs // 2]
    full = sorted(once(statement) for _ in range(runs))[runs // 2]
    return max(0.0, full - bare)
