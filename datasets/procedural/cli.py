"""``analyst-env generate``: freeze procedural tasks into a portable task directory.

``generate --count N --seed S [--split train|test|ood] [--start I] --out DIR``
makes tasks ``I .. I + N - 1`` of the split from seed ``S`` and writes them as a
task directory (``taskdir``) that ``serve --dataset tasks:DIR`` and ``validate
tasks:DIR`` read. ``--with-solutions`` also writes ``solutions.jsonl``, each task's
worked solution (``solution_files``), beside ``tasks.jsonl`` and outside every task.
The seed itself is not written into the directory, only a
digest of it, so a frozen set does not hand out the key to the rest of the space.

A thousand tasks take half a minute, so a progress bar runs on stderr while they
are made, and the command ends with one line a person reads; ``--json`` prints
the same summary as one JSON object instead, for scripts.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

from analyst_env.datasets.procedural.splits import SPLITS


def add_parser(sub) -> None:
    gen = sub.add_parser(
        "generate", help="Write procedural tasks (JSONL + files) into a portable task directory"
    )
    gen.add_argument("--count", type=int, required=True, help="How many tasks")
    gen.add_argument(
        "--seed", type=int, required=True, help="Deployment seed the tasks are made from"
    )
    gen.add_argument(
        "--split", default="train", choices=SPLITS, help="Split to draw from (default train)"
    )
    gen.add_argument("--start", type=int, default=0, help="First index of the split (default 0)")
    gen.add_argument(
        "--out", required=True, help="Output directory (must not hold a tasks.jsonl yet)"
    )
    gen.add_argument(
        "--no-oracle-steps", action="store_true", help="Leave oracle_steps out of the records"
    )
    gen.add_argument(
        "--with-solutions",
        action="store_true",
        help="Also write solutions.jsonl: each task's worked solution (the tool calls that "
        "solve it from its files), for training data; never served",
    )
    gen.add_argument(
        "--json",
        action="store_true",
        help="Print the summary as one JSON object (for scripts) instead of a line of text",
    )
    gen.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from analyst_env.datasets.procedural.dataset import ProceduralDataset
    from analyst_env.datasets.procedural.generator import GENERATOR_VERSION
    from analyst_env.datasets.procedural.sampling import take, timing
    from analyst_env.datasets.procedural.solution_files import write_solutions
    from analyst_env.datasets.procedural.taskdir import TaskDirError, write_task_dir

    if args.count < 1 or args.start < 0:
        print("error: --count must be at least 1 and --start at least 0", file=sys.stderr)
        return 2
    out = Path(args.out)
    work = Path(
        tempfile.mkdtemp(prefix=".generate-", dir=out.parent if out.parent.exists() else None)
    )
    try:
        ds = ProceduralDataset(args.seed, cache_dir=work, keep_dirs=args.count + 1)
        bar = tqdm(total=args.count, desc=f"generate {args.split}", unit="task", file=sys.stderr)
        try:
            tasks, seconds = take(
                ds, args.split, args.start, args.count, on_task=lambda _task: bar.update(1)
            )
        except IndexError as exc:
            bar.close()
            print(f"error: {exc}", file=sys.stderr)
            return 2
        bar.close()
        meta = {
            "name": f"procedural-{args.split}-{args.start}-{args.start + args.count - 1}",
            "generator": "procedural",
            "generator_version": GENERATOR_VERSION,
            "split": args.split,
            "start": args.start,
            "count": args.count,
            "seed_sha256": hashlib.sha256(str(args.seed).encode()).hexdigest(),
            "generation": ds.stats(),
        }
        try:
            path = write_task_dir(tasks, out, meta, oracle_steps=not args.no_oracle_steps)
            # while the tasks' cache folders (and their plans) still exist
            solved = write_solutions(tasks, out) if args.with_solutions else None
        except (TaskDirError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    finally:
        shutil.rmtree(work, ignore_errors=True)
    stats = ds.stats()
    took = timing(seconds)
    summary = {
        "wrote": str(path.parent),
        "tasks": len(tasks),
        "seconds": round(sum(seconds), 2),
        "p50_ms": round(took["p50_ms"], 1),
        "p99_ms": round(took["p99_ms"], 1),
        "tasks_per_s": round(took["tasks_per_s"], 1),
        "attempts": stats["attempts"],
        "dropped": stats["dropped"],
        "drop_rate": round(stats["drop_rate"], 4),
        "by_reason": stats["by_reason"],
        **(solved or {}),
    }
    print(json.dumps(summary, sort_keys=True) if args.json else human_summary(summary))
    return 0


def human_summary(summary: dict) -> str:
    """One line a person reads at the end of ``generate``."""
    line = (
        f"wrote {summary['tasks']} tasks to {summary['wrote']} in {summary['seconds']:.1f} s "
        f"(p50 {summary['p50_ms']:.0f} ms, p99 {summary['p99_ms']:.0f} ms per task; "
        f"{summary['dropped']} of {summary['attempts']} draws dropped by their checks)"
    )
    if "solutions" in summary:
        missing = summary["without_solution"]
        line += f"; {summary['solutions']} worked solutions in solutions.jsonl" + (
            f" ({sum(missing.values())} without one: {', '.join(missing)})" if missing else ""
        )
    return line
