"""``analyst-env serve --workers N``: N server processes accepting on one listening socket.

One ``serve`` process speaks the protocol on one core, so ``serve`` starts one
worker per available core (``default_workers``, up to 8; with one core it serves
in-process, no supervisor). The supervisor here binds
the port once and starts N ``analyst-env serve`` worker processes that inherit the
socket (``--listen-fd``); the kernel hands each new connection (one WebSocket, one
session) to a worker that is waiting in ``accept``, so a busy worker takes fewer.
Each worker is a whole server: its own sandbox backend, its own slot-uid range
(claimed through ``envs/local/uid_ranges.py``, so the ranges are disjoint) and its
own sessions, bounded by ``--max-sessions`` per worker.

What the workers share and what they do not:

* trajectories, the ``/web`` replay and ``/envs`` recipes and build states live in
  the state directory (files and SQLite), which every worker reads and writes;
* ``/metrics`` is summed over the workers (``prometheus_client``'s multiprocess mode
  in a directory the supervisor owns; gauges are refreshed every second), whichever
  worker answers the scrape;
* the ``/web`` live view shows every worker's sessions: each worker also listens on
  a Unix socket in a directory the supervisor makes for them (``server/peers.py``)
  and asks its siblings there;
* ``/ready`` counts every worker's sessions and slots (asked the same way).

SIGTERM or SIGINT to the supervisor drains every worker (each as ``drain.py``
describes) and exits 0; a supervisor killed outright drains them too (they get
SIGTERM as its death signal). A worker that dies on its own stops the others the same way
and the supervisor exits with that worker's status (1 if a signal killed it), so the
process manager restarts the whole server.
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from analyst_env.server import peers

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
"""``prometheus_client``'s variable: the directory the supervisor makes for every worker's
metric values, which ``/metrics`` sums (``server/metrics.py``). Defined here, not beside the
metrics, so that the supervisor does not import them: they import the scorers (pandas,
openpyxl), about half a second before any worker could start."""

MAX_DEFAULT_WORKERS = 8
"""``serve`` starts one worker per available core, up to this many (``--workers`` overrides)."""


def cores_available() -> int:
    """The CPUs this process may run on: its affinity, capped by its cgroup's CPU quota.

    A container limited to 2 CPUs on a 64-core node sees 64 in its affinity mask;
    the quota (cgroup v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``) is what it gets.
    """
    cores = len(os.sched_getaffinity(0))
    quota = _cgroup_cpu_quota()
    return max(1, min(cores, math.ceil(quota))) if quota else cores


def _cgroup_cpu_quota() -> float | None:
    try:
        limit, every = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        return None if limit == "max" else int(limit) / int(every)
    except (OSError, ValueError):
        pass
    try:
        quota = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read_text())
        period = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read_text())
        return quota / period if quota > 0 and period > 0 else None
    except (OSError, ValueError):
        return None


def default_workers() -> int:
    """How many workers ``serve`` starts without ``--workers``: one per available core."""
    return min(cores_available(), MAX_DEFAULT_WORKERS)


def listening_socket(host: str, port: int) -> socket.socket:
    """A bound, listening TCP socket for ``host:port`` that child processes can inherit."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def worker_argv(argv: list[str], fd: int) -> list[str]:
    """The worker's command line: the supervisor's, with ``--workers`` replaced by the socket."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "--workers":
            skip = True
            continue
        if arg.startswith("--workers="):
            continue
        out.append(arg)
    return [*out, "--listen-fd", str(fd)]


def supervise(argv: list[str], host: str, port: int, workers: int) -> int:
    """Run ``workers`` copies of ``analyst-env serve argv`` on one socket until a signal."""
    from prometheus_client import multiprocess

    sock = listening_socket(host, port)
    metrics_dir = tempfile.mkdtemp(prefix="analyst-env-metrics-")
    peers_dir = tempfile.mkdtemp(prefix="analyst-env-peers-")  # mode 0700: the workers' alone
    env = {
        **os.environ,
        MULTIPROC_ENV: metrics_dir,
        peers.DIR_ENV: peers_dir,
        peers.COUNT_ENV: str(workers),
    }
    # the interpreter, not a console script beside it: a system install puts the script in
    # /usr/local/bin and the interpreter in /usr/bin
    command = [sys.executable, "-m", "analyst_env.cli", "serve", *worker_argv(argv, sock.fileno())]
    stopping: list[int] = []

    def stop(sig: int, _frame=None) -> None:
        stopping.append(sig)
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(sig if len(stopping) == 1 else signal.SIGKILL)

    procs = [
        subprocess.Popen(
            command,
            env={**env, peers.INDEX_ENV: str(index)},
            pass_fds=(sock.fileno(),),
            preexec_fn=_drain_with_parent,
        )
        for index in range(workers)
    ]
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    print(
        f"analyst-env: {workers} workers (pids {', '.join(str(p.pid) for p in procs)}) on "
        f"{host}:{sock.getsockname()[1]}",
        file=sys.stderr,
        flush=True,
    )
    failed: int | bool = False
    try:
        while any(proc.poll() is None for proc in procs):
            for proc in procs:
                if proc.poll() is not None and proc.returncode != 0 and not stopping:
                    print(
                        f"analyst-env: worker {proc.pid} exited with {proc.returncode}; "
                        "stopping the others",
                        file=sys.stderr,
                        flush=True,
                    )
                    failed = failed or proc.returncode  # the first failure's status
                    stop(signal.SIGTERM)
            time.sleep(0.2)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sock.close()
        for proc in procs:
            multiprocess.mark_process_dead(proc.pid, metrics_dir)
        shutil.rmtree(metrics_dir, ignore_errors=True)
        shutil.rmtree(peers_dir, ignore_errors=True)
    failed = failed or next((proc.returncode for proc in procs if proc.returncode), False)
    if not failed:
        return 0
    # a worker's own status (2: refused its configuration) tells the operator why; one
    # killed by a signal (negative status) is a failure the process manager restarts
    return failed if isinstance(failed, int) and failed > 1 else 1


def _drain_with_parent() -> None:
    """In a new worker: a supervisor killed outright (SIGKILL) still drains its workers."""
    from analyst_env.envs.kernel.procctl import set_parent_death_signal

    set_parent_death_signal(signal.SIGTERM)


def inherited_socket(fd: int) -> socket.socket:
    """The supervisor's listening socket, in a worker (family and type read from the fd)."""
    return socket.socket(fileno=fd)
