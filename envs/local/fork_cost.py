"""CPU that one fork of a warm zygote costs, in the parent and in the child.

Why: after a cold burst, the first steps wait for kernels to be made, and making a
kernel is mostly the operating system copying the warm interpreter's page tables
(``fork``) and then the pages the child writes (copy-on-write faults). This times
that part alone, without the sandbox's confinement or the server, so the floor of
"first step after a burst" can be read as kernels x CPU per fork / cores.

    python -m analyst_env.envs.local.fork_cost --forks 200 --rounds 3

Each round prepares the default image as the zygote does (``zygote.prepare``) in a
fresh interpreter with the zygote's single-threaded environment, forks ``--forks``
children one after another, and has each child run one ``x = 1 + 1`` cell (which
writes to the inherited heap as a kernel's first cell does) before it exits.
``--allocator-env`` adds environment variables to the measured interpreter, to
compare allocators (e.g. ``PYTHONMALLOC=malloc
GLIBC_TUNABLES=glibc.malloc.hugetlb=1``: glibc's heap on transparent huge pages).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

from analyst_env.envs.fork_env import SINGLE_THREADED_ENV


def measure(forks: int) -> dict[str, float]:
    """Fork ``forks`` children of a warm zygote shell; CPU and wall milliseconds per fork."""
    from analyst_env.envs.kernel.image_specs import IMAGES
    from analyst_env.envs.local.zygote import prepare

    shell = prepare(IMAGES["default"])
    with open("/proc/self/statm") as f:
        rss_mib = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    started, parent_cpu = time.perf_counter(), time.process_time()
    for _ in range(forks):
        pid = os.fork()
        if pid == 0:
            shell.run_cell("x = 1 + 1", store_history=False, silent=True)
            os._exit(0)
        os.waitpid(pid, 0)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "rss_mib": rss_mib,
        "wall_ms": (time.perf_counter() - started) / forks * 1e3,
        "parent_cpu_ms": (time.process_time() - parent_cpu) / forks * 1e3,
        "child_cpu_ms": (children.ru_utime + children.ru_stime) / forks * 1e3,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--forks", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--allocator-env", nargs="*", default=[], metavar="NAME=VALUE")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)  # one round
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.forks)))
        return
    extra = dict(item.split("=", 1) for item in args.allocator_env)
    env = {**os.environ, **SINGLE_THREADED_ENV, **extra}
    rounds = [
        json.loads(
            subprocess.run(
                [sys.executable, "-m", __spec__.name, "--child", "--forks", str(args.forks)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.splitlines()[-1]
        )
        for _ in range(args.rounds)
    ]
    for key in rounds[0]:
        values = [r[key] for r in rounds]
        print(f"{key:14s} median {statistics.median(values):8.2f}  {[round(v, 2) for v in values]}")


if __name__ == "__main__":
    main()
