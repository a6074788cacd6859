"""Cost of one scoring: a fork of the server per answer against a long-lived scoring worker.

``python -m analyst_env.benchmarks.scoring_cost [--n 40] [--heap-mb 300]``

For a file scorer (``sql_execution`` on a 1,000-row task database) and a text scorer
(``numeric`` on a 2 KiB answer, over the in-process cap) it times ``score_bounded`` end to
end, as ``server/verification.py`` calls it, both ways: through the warm workers of
``verifiers/score_pool.py``, and in a child forked from this process (the same scorer
function registered under a name the workers do not have, which sends it to the fork).
A fork costs in proportion to the heap it copies, so this process first holds ``--heap-mb``
of touched memory, standing for a server's (a server holding sessions is ~300 MB). Also
times the short-answer in-process path for scale. Prints a Markdown table of medians.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from analyst_env.task_format import VerifierSpec
from analyst_env.verifiers import SCORERS, register
from analyst_env.verifiers.bounded import SCORING_POOL, score_bounded
from analyst_env.verifiers.scoring_common import ScoringLimits


def _database(folder: Path) -> Path:
    db = folder / "shop.sqlite"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE t (a INTEGER, b TEXT)")
        con.executemany("INSERT INTO t VALUES (?, ?)", [(i, f"r{i}") for i in range(1000)])
    con.close()
    return db


def _median_ms(n: int, run, *args) -> tuple[float, float]:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        verdict = run(*args)
        times.append((time.perf_counter() - started) * 1000)
        assert verdict.reward == 1.0, verdict.detail
    return statistics.median(times), min(times)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=40, help="scorings per case")
    parser.add_argument("--heap-mb", type=int, default=300, help="memory this process holds")
    args = parser.parse_args(argv)
    ballast = bytearray(args.heap_mb * 1024 * 1024)
    ballast[::4096] = b"x" * len(ballast[::4096])
    limits = ScoringLimits(timeout_s=60)
    register("bench_sql_forked")(SCORERS["sql_execution"])
    register("bench_numeric_forked")(SCORERS["numeric"])
    with tempfile.TemporaryDirectory(prefix="analyst-scoring-cost-") as tmp:
        files = {"shop.sqlite": str(_database(Path(tmp)))}
        sql = ("SELECT count(*) FROM t WHERE a % 7 = 0", "SELECT 143")
        long_number = "The answer is 4.\n" + " " * 2048
        cases = {
            "sql_execution (file scorer)": (
                lambda name: score_bounded(
                    VerifierSpec(name=name, params={"db": "shop.sqlite"}), *sql, limits, files
                ),
                "sql_execution",
                "bench_sql_forked",
            ),
            "numeric, 2 KiB answer (text scorer)": (
                lambda name: score_bounded(VerifierSpec(name=name), long_number, 4, limits),
                "numeric",
                "bench_numeric_forked",
            ),
        }
        SCORING_POOL.warm()
        rows = []
        for label, (run, worker_name, fork_name) in cases.items():
            worker = _median_ms(args.n, run, worker_name)
            forked = _median_ms(args.n, run, fork_name)
            rows.append((label, worker, forked))
        short = _median_ms(
            args.n, lambda: score_bounded(VerifierSpec(name="numeric"), "4", 4, limits)
        )
    print(f"heap held: {args.heap_mb} MB; n = {args.n}; workers started: {SCORING_POOL.started}")
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs\n")
    print("| scorer | worker: median (min) | fork: median (min) | fork / worker |")
    print("|---|---|---|---|")
    for label, (w_med, w_min), (f_med, f_min) in rows:
        print(
            f"| {label} | {w_med:.2f} ms ({w_min:.2f}) | {f_med:.2f} ms ({f_min:.2f}) "
            f"| {f_med / w_med:.1f}x |"
        )
    print(f"| numeric, short answer, in process | {short[0]:.3f} ms ({short[1]:.3f}) | | |")
    SCORING_POOL.close()
    del ballast


if __name__ == "__main__":
    main()
