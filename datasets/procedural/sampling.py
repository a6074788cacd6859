"""Samples of the procedural set for ``generate`` and ``validate``, and the determinism check.

Both commands take a contiguous range of one split (``--split``, ``--start``,
``--count`` / ``--sample``). Determinism is checked by making the same tasks
again in a fresh cache and comparing every file byte for byte and every task
record field for field.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from analyst_env.datasets.procedural.dataset import ProceduralDataset
from analyst_env.task_format import Task, answer_references


def take(
    ds: ProceduralDataset,
    split: str,
    start: int,
    count: int,
    on_task: Callable[[Task], None] | None = None,
) -> tuple[list[Task], list[float]]:
    """Tasks ``start .. start + count - 1`` of ``split`` and the seconds each took to make.

    ``on_task`` is called after each task is made (a progress bar's tick).
    """
    tasks, seconds = [], []
    for index in range(start, start + count):
        t0 = time.perf_counter()
        tasks.append(ds.task(split, index))
        seconds.append(time.perf_counter() - t0)
        if on_task is not None:
            on_task(tasks[-1])
    return tasks, seconds


def fingerprint(task: Task) -> str:
    """A digest of a task's record (host paths aside), its files' and its references' bytes."""
    record = task.model_dump(mode="json") | {"files": {}}
    for ref in answer_references(record["answer"]):  # a workbook task's reference, by content
        ref["path"] = hashlib.sha256(Path(ref["path"]).read_bytes()).hexdigest()
    h = hashlib.sha256(json.dumps(record, sort_keys=True).encode())
    for name in sorted(task.files):
        h.update(name.encode() + b"\0" + Path(task.files[name]).read_bytes())
    return h.hexdigest()


def data_digest(task: Task) -> str:
    """A digest of the task's files alone (for the distinct-data ratio)."""
    h = hashlib.sha256()
    for name in sorted(task.files):
        h.update(Path(task.files[name]).read_bytes())
    return h.hexdigest()


def nondeterministic(seed: int, tasks: list[Task]) -> list[str]:
    """Ids of the tasks that come out differently when made again from the same seed."""
    with tempfile.TemporaryDirectory(prefix="procedural-again-") as tmp:
        again = ProceduralDataset(seed, cache_dir=tmp)
        return [t.id for t in tasks if fingerprint(again.task_by_id(t.id)) != fingerprint(t)]


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return (
        ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))] if ordered else 0.0
    )


def timing(seconds: list[float]) -> dict[str, Any]:
    return {
        "tasks": len(seconds),
        "p50_ms": 1000 * percentile(seconds, 50),
        "p99_ms": 1000 * percentile(seconds, 99),
        "tasks_per_s": len(seconds) / sum(seconds) if sum(seconds) else 0.0,
    }
