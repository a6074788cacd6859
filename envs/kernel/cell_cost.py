"""CPU time of a trivial cell in the kernel's IPython shell: as shipped, and with every formatter.

Why: a trivial step's time is the protocol, the server, the socket to the kernel and the
kernel's own shell; this isolates the last. CPU time (``time.process_time``) of the shell
alone moves less with the machine's load than a served step's wall time, and each mode
runs in a fresh interpreter, alternating, so both see the same machine.

    python -m analyst_env.envs.kernel.cell_cost --rounds 3 --cells 5000

prints the median microseconds per cell of each mode: ``shipped`` (the shell of
``envs/kernel/ipyshell.py``) and ``every-formatter`` (IPython's ten formatters, as before
``SHOWN_MIME_TYPES``).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import warnings

MODES = ("shipped", "every-formatter")


def cell_cpu_us(mode: str, cells: int) -> float:
    """CPU microseconds per ``1+1`` cell in a shell built here, after a warm-up."""
    from analyst_env.envs.kernel.ipyshell import build_shell

    warnings.simplefilter("ignore")  # IPython warns when its output cache wraps
    shell = build_shell()
    if mode == "every-formatter":
        for formatter in shell.display_formatter.formatters.values():
            formatter.enabled = True
    for _ in range(300):
        shell.execute("1+1", silent=False)
    start = time.process_time()
    for _ in range(cells):
        shell.execute("1+1", silent=False)
    return (time.process_time() - start) / max(cells, 1) * 1e6


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cells", type=int, default=5000)
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)  # one child's run
    args = parser.parse_args(argv)
    if args.mode:
        print(cell_cpu_us(args.mode, args.cells))
        return
    samples: dict[str, list[float]] = {mode: [] for mode in MODES}
    for _ in range(args.rounds):
        for mode in MODES:
            out = subprocess.run(
                [sys.executable, "-m", __spec__.name, "--mode", mode, "--cells", str(args.cells)],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            samples[mode].append(float(out.split()[-1]))
    for mode, values in samples.items():
        print(f"{mode:16s} {statistics.median(values):7.1f} us CPU per cell  {values}")


if __name__ == "__main__":
    main()
