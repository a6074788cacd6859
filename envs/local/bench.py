"""Latency benchmark of the local backend: ``python -m analyst_env.envs.local.bench [-n N]``.

Prints median and p90 (milliseconds) of: ``start()`` until the first ``1+1``
result when a pre-forked standby is ready (the hand-out path, with a small CSV
staged), the same with no standby (a synchronous fork), a trivial cell round
trip, a ``df.describe()`` cell, and ``close()``. The zygote is warmed first and
its boot time is reported separately, with the protections in force.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import tempfile
import time
from collections.abc import Callable

from analyst_env.envs.local.backend import LocalSandboxBackend

_SETUP = "import numpy as np, pandas as pd\ndf = pd.DataFrame(np.random.rand(1000, 5))"


def _timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def _row(label: str, samples: list[float]) -> str:
    p90 = statistics.quantiles(samples, n=10)[-1] if len(samples) > 1 else samples[0]
    return f"{label:<32} median {statistics.median(samples):8.2f} ms   p90 {p90:8.2f} ms"


def main() -> None:
    """Run the benchmark and print one line per measurement."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=30, help="episodes to measure (default 30)")
    parser.add_argument("--cells", type=int, default=20, help="trivial cells per episode")
    args = parser.parse_args()

    csv = os.path.join(tempfile.mkdtemp(prefix="bench-"), "small.csv")
    with open(csv, "w") as f:
        f.write("a,b\n" + "".join(f"{i},{i * 2}\n" for i in range(200)))
    files = {"small.csv": csv}
    cold = LocalSandboxBackend(standbys=0)
    try:
        cold.warm_up()
        synchronous = []
        for _ in range(args.n):
            started = time.perf_counter()
            sandbox = cold.start("default", files=files)
            sandbox.run_cell("1+1", timeout_s=30)
            synchronous.append((time.perf_counter() - started) * 1000)
            sandbox.close()
    finally:
        cold.close()
    backend = LocalSandboxBackend()
    try:
        boot_ms = _timed(backend.warm_up)
        first, trivial, describe, close = [], [], [], []
        for _ in range(args.n):
            deadline = time.monotonic() + 30
            while not backend._ready.get("default") and time.monotonic() < deadline:
                time.sleep(0.01)  # let the background refill finish: measure the hand-out
            started = time.perf_counter()
            sandbox = backend.start("default", files=files)
            sandbox.run_cell("1+1", timeout_s=30)
            first.append((time.perf_counter() - started) * 1000)
            for _ in range(args.cells):
                trivial.append(_timed(functools.partial(sandbox.run_cell, "1+1", timeout_s=30)))
            sandbox.run_cell(_SETUP, timeout_s=30)
            describe.append(
                _timed(functools.partial(sandbox.run_cell, "df.describe()", timeout_s=30))
            )
            close.append(_timed(sandbox.close))
        protections = backend.protections()
    finally:
        backend.close()
    print("protections: " + ", ".join(f"{k}={v}" for k, v in protections.items()))
    print(f"zygote boot (once per image)     {boot_ms:8.2f} ms")
    print(_row("standby start()+CSV -> 1+1", first))
    print(_row("no standby start()+CSV -> 1+1", synchronous))
    print(_row("trivial cell round trip", trivial))
    print(_row("df.describe() cell", describe))
    print(_row("close()", close))


if __name__ == "__main__":
    main()
