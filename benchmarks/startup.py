"""``python -m analyst_env.benchmarks.startup``: ``analyst-env serve`` to ``/health``, ``/ready``.

``analyst-env bench`` times one cold start of ``serve --workers 1`` among its other
figures; this times several cold starts of ``serve`` as an operator runs it (default
workers: one per core, unless ``--workers``), each from the process's start to the
first 200 of ``/health`` (liveness: the routes are served, the isolation checks passed)
and to the first 200 of ``/ready`` (the sandbox backend's warm-up finished: a reset
gets a kernel without waiting for a zygote to boot). Wall-clock time: on a shared
machine the neighbours' load counts, so the load average is printed with the figures,
and so is the CPU time the server's process tree had used by then (``health_cpu_s``,
``ready_cpu_s``: every process of the tree, and the children it waited for), which
the neighbours do not change: on a quiet machine of C cores, start-up takes at least
that divided by C.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import httpx

from analyst_env.benchmarks.capacity import tree_cpu_s
from analyst_env.benchmarks.servers import ServerProcess


def _first_200(url: str, deadline: float) -> float:
    """When ``url`` first answered 200 (``time.perf_counter``), polling every 10 ms."""
    while time.perf_counter() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return time.perf_counter()
        except httpx.HTTPError:
            pass
        time.sleep(0.01)
    raise RuntimeError(f"{url} never answered 200")


def one_start(workers: int | None) -> dict[str, float]:
    """Seconds from ``serve``'s start to a healthy ``/health`` and to a ready ``/ready``, and
    the CPU seconds the server's tree had used at each."""
    argv = [str(Path(sys.executable).with_name("analyst-env")), "serve", "--port", "{port}"]
    argv += ["--log-level", "warning"]
    if workers is not None:
        argv += ["--workers", str(workers)]
    started = time.perf_counter()
    with ServerProcess(argv) as server:
        healthy, health_cpu = server.cold_start_s, tree_cpu_s(server.running.pid)
        assert healthy is not None
        ready = _first_200(f"{server.url}/ready", started + 120) - started
        ready_cpu = tree_cpu_s(server.running.pid)
    return {
        "health_s": healthy,
        "ready_s": ready,
        "health_cpu_s": health_cpu,
        "ready_cpu_s": ready_cpu,
    }


def summary(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 2),
        "min": round(min(values), 2),
        "max": round(max(values), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--runs", type=int, default=5, help="cold starts (default 5)")
    parser.add_argument("--workers", type=int, help="serve's --workers (default: serve's own)")
    args = parser.parse_args()
    runs = [one_start(args.workers) for _ in range(args.runs)]
    report = {
        "runs": args.runs,
        "workers": args.workers if args.workers is not None else "default",
        "health_s": summary([r["health_s"] for r in runs]),
        "ready_s": summary([r["ready_s"] for r in runs]),
        "health_cpu_s": summary([r["health_cpu_s"] for r in runs]),
        "ready_cpu_s": summary([r["ready_cpu_s"] for r in runs]),
        "each": [{k: round(v, 2) for k, v in r.items()} for r in runs],
        "load_average": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
