"""Generation figures for BENCHMARKS.md: ``python -m analyst_env.datasets.procedural.bench``.

Makes tasks ``0 .. N-1`` of a split in a fresh cache, one after another in one
process (so the figures are per core), and reports tasks per second, the
generation time per task as wall-clock and as CPU time of this process (p50,
p99; CPU time by file kind too: on a shared machine wall-clock time mostly
measures the neighbours), drops by reason
and the distinct-data ratio (share of tasks whose files are unique). The
protocol check of the same tasks is ``analyst-env validate procedural:SEED
--sample N``.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import gc
import json
import tempfile
import time
from collections.abc import Iterator

from analyst_env.datasets.procedural.dataset import DroppedCounts, ProceduralDataset
from analyst_env.datasets.procedural.sampling import data_digest, timing
from analyst_env.paths import cache_root


@contextlib.contextmanager
def warm_dataset(seed: int, split: str, count: int) -> Iterator[ProceduralDataset]:
    """A dataset in a fresh cache, warmed on a task past the ``count`` to be measured (imports
    and first-use costs are not per-task costs), its drop counts zeroed."""
    cache_root().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="procedural-bench-", dir=cache_root()) as tmp:
        ds = ProceduralDataset(seed, cache_dir=tmp, keep_dirs=256)
        ds.task(split, count + 10)
        gc.collect()
        gc.freeze()  # as `serve` does once started (cli._freeze_startup_heap)
        ds.counts = DroppedCounts()
        yield ds


def run(count: int, seed: int, split: str) -> dict:
    with warm_dataset(seed, split, count) as ds:
        seconds, cpu, by_kind, digests = [], [], collections.defaultdict(list), set()
        started, cpu_started = time.perf_counter(), time.process_time()
        for i in range(count):
            t0, c0 = time.perf_counter(), time.process_time()
            task = ds.task(split, i)
            took = time.perf_counter() - t0
            seconds.append(took)
            cpu.append(time.process_time() - c0)
            by_kind[task.metadata["kind"]].append(cpu[-1])
            digests.add(data_digest(task))
        wall, cpu_total = time.perf_counter() - started, time.process_time() - cpu_started
        stats = ds.stats()
    return {
        "count": count,
        "seed": seed,
        "split": split,
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu_total, 1),
        "wall": timing(seconds),
        "cpu": timing(cpu),
        "cpu_by_kind": {k: timing(v) for k, v in sorted(by_kind.items())},
        "attempts": stats["attempts"],
        "dropped": stats["dropped"],
        "drop_rate": round(stats["drop_rate"], 4),
        "by_reason": stats["by_reason"],
        "questions_redrawn": stats["questions_redrawn"],
        "redrawn_by_reason": stats["redrawn_by_reason"],
        "distinct_data_ratio": len(digests) / count,
    }


def tasks_to_make(description: str) -> argparse.Namespace:
    """``--count``, ``--seed`` and ``--split`` from the command line (this and
    ``phase_costs`` make the same tasks)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--split", default="train")
    return parser.parse_args()


def main() -> None:
    args = tasks_to_make(__doc__.splitlines()[0])
    print(json.dumps(run(args.count, args.seed, args.split), indent=1))


if __name__ == "__main__":
    main()
