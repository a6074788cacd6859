"""``analyst-env serve --workers N``: N server processes accepting on one listening socket.

One ``serve`` process speaks the protocol on one core. The supervisor here binds
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
and the supervisor exits 1, so the process manager restarts the whole server: a
worker started alone would mark the other workers' running builds as interrupted.
"""

from __future__ import annotations

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
from analyst_env.server.metrics import MULTIPROC_ENV


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
    exe = str(Path(sys.executable).with_name("analyst-env"))
    command = [exe, "serve", *worker_argv(argv, sock.fileno())]
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
        f"{host}:{port}",
        file=sys.stderr,
        flush=True,
    )
    failed = False
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
                    failed = True
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
    failed = failed or any(proc.returncode != 0 for proc in procs)
    return 1 if failed else 0


def _drain_with_parent() -> None:
    """In a new worker: a supervisor killed outright (SIGKILL) still drains its workers."""
    from analyst_env.envs.local.procctl import set_parent_death_signal

    set_parent_death_signal(signal.SIGTERM)


def inherited_socket(fd: int) -> socket.socket:
    """The supervisor's listening socket, in a worker (family and type read from the fd)."""
    return socket.socket(fileno=fd)
