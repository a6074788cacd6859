"""What a soaked server holds, counted from outside: processes, fds, memory, mounts, scratch.

The soak compares these counts before and after its clients run; anything
left above the baseline once episodes are torn down is a leak. Only what
belongs to the one server counts: its process tree, the cgroups its backend
names after its pid, the scratch directories in its own temporary directory.
The main process's RSS is also sampled while the clients run, to tell a plateau
from a slope.
"""

from __future__ import annotations

import glob
import os
import threading
import time
from typing import Any

from analyst_env.benchmarks.servers import ServerProcess, process_tree

LEAK_COUNTS = ("processes", "fds", "mounts", "cgroups", "scratch_dirs")
"""The counts that must come back to the baseline (RSS is judged by its growth instead)."""


def snapshot(server: ServerProcess) -> dict[str, Any]:
    """What the server holds now."""
    pids = process_tree(server.running.pid)
    fds = 0
    for pid in pids:
        try:
            fds += len(os.listdir(f"/proc/{pid}/fd"))
        except OSError:
            pass
    with open("/proc/self/mountinfo") as fh:
        mounts = sum(1 for _ in fh)
    pattern = f"/sys/fs/cgroup/**/analyst-env-{server.running.pid}-*"
    cgroups = len(glob.glob(pattern, recursive=True))
    scratch = len(glob.glob(os.path.join(server.env["TMPDIR"], "analyst-env-local-*")))
    return {
        "processes": len(pids),
        "fds": fds,
        "rss_mib": rss_mib(server),
        "mounts": mounts,
        "cgroups": cgroups,
        "scratch_dirs": scratch,
    }


def rss_mib(server: ServerProcess) -> float:
    """The server's main process's resident memory, in MiB."""
    with open(f"/proc/{server.running.pid}/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:")) / 1024


class RssSampler:
    """Records the server's RSS every ``period_s`` on a thread, to tell a plateau from a leak."""

    def __init__(self, server: ServerProcess, period_s: float) -> None:
        self.samples: list[tuple[float, float]] = []
        self._server, self._period_s = server, period_s
        self._stop = threading.Event()
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="soak-rss", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._period_s):
            self.samples.append(
                (round(time.monotonic() - self._started, 1), round(rss_mib(self._server), 1))
            )

    def stop(self) -> list[tuple[float, float]]:
        self._stop.set()
        self._thread.join()
        return self.samples


def settle(server: ServerProcess, baseline: dict[str, Any], wait_s: float) -> dict[str, Any]:
    """The snapshot once the counts are back to the baseline, or after ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        now = snapshot(server)
        back = all(now[k] <= baseline[k] for k in LEAK_COUNTS)
        if back or time.monotonic() > deadline:
            return now
        time.sleep(0.5)
