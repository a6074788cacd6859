"""What ``validate procedural --sample N`` checks before the protocol runs: generation and
determinism."""

from __future__ import annotations

from typing import Any

from analyst_env.datasets.procedural.dataset import KEEP_DIRS, ProceduralDataset
from analyst_env.datasets.procedural.sampling import data_digest, nondeterministic, take, timing
from analyst_env.task_format import Task


def sample_for_validation(
    ds: ProceduralDataset, split: str, start: int, count: int
) -> tuple[list[Task], dict[str, Any]]:
    """Make the sample, time it, remake it from the seed to check determinism; report drops too."""
    if count < 1:
        raise ValueError(f"--sample must be at least 1, got {count}")
    ds.keep_at_least(count + KEEP_DIRS)  # every file is read again after the last is made
    tasks, seconds = take(ds, split, start, count)
    stats = ds.stats()
    digests = {data_digest(t) for t in tasks}
    return tasks, {
        "split": split,
        "start": start,
        "sample": count,
        "timing": timing(seconds),
        "attempts": stats["attempts"],
        "dropped": stats["dropped"],
        "drop_rate": stats["drop_rate"],
        "by_reason": stats["by_reason"],
        "distinct_data_ratio": len(digests) / len(tasks),
        "nondeterministic": nondeterministic(ds.seed, tasks),
    }
