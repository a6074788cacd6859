"""Where a task's generation time goes: mean CPU per phase, for attempts that pass and fail.

Why: the slowest tasks (the p99 of ``procedural.bench``) are mostly those that took
more than one attempt, and no single phase of an attempt dominates. This shows the
split, so a change aimed at generation time can be aimed and checked.

    python -m analyst_env.datasets.procedural.phase_costs --count 1000 --seed 1

Makes tasks ``0 .. N-1`` of a split as ``bench`` does, with a timer around each
phase of ``generator.attempt`` (this thread's CPU time; the wrappers are removed
when the run ends). Phases nest, and each figure includes the phases called inside
it: ``checks`` (the task made from the written files) includes the readings
and the engines run on them; ``screen`` includes the engine run on the clean
tables. Also prints the tasks that took more than one attempt among the slowest 1 %, and
what the tasks over the 50 ms goal have in common (attempts, rows, file kind).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import json
import time
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from analyst_env.datasets.procedural import dataset as dataset_module
from analyst_env.datasets.procedural import engine_pandas, engine_plain, files, generator
from analyst_env.datasets.procedural import readings as readings_module
from analyst_env.datasets.procedural.bench import tasks_to_make, warm_dataset

PHASES: tuple[tuple[ModuleType | type, str, str], ...] = (
    (generator, "draw_attempt", "choose template, domain and layout"),
    (generator, "draw", "draw the tables"),
    (generator, "_records", "records by role"),
    (generator, "draw_question", "draw questions"),
    (generator, "_screen", "screen on the clean tables"),
    (generator, "apply_mess", "add the defects"),
    (readings_module.Written, "__init__", "write the files"),
    (generator, "_task", "checks on the written files"),
    (files, "read_pandas", "  read through pandas"),
    (files, "read_plain", "  read through the standard library"),
    (engine_pandas, "prepare", "  pandas engine: prepare"),
    (engine_pandas, "evaluate", "  pandas engine: evaluate"),
    (engine_plain, "prepare", "  plain engine: prepare"),
    (engine_plain, "evaluate", "  plain engine: evaluate"),
)
"""(owner, attribute, label): the functions timed; an indented label is inside the one above."""
GOAL_MS = 50
"""Issue 38's bound on a task's generation CPU at p99: the report counts the tasks above it."""


def _timed(
    fn: Callable[..., Any], label: str, spent: collections.defaultdict[str, float]
) -> Callable:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[label] += time.thread_time() - started

    return wrapper


@contextlib.contextmanager
def timers(spent: collections.defaultdict[str, float]) -> Iterator[None]:
    """Every phase of ``PHASES`` adds its CPU time to ``spent`` while this is open."""
    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in PHASES]
    try:
        for (owner, name, label), (_, _, fn) in zip(PHASES, originals):
            setattr(owner, name, _timed(fn, label, spent))
        yield
    finally:
        for owner, name, fn in originals:
            setattr(owner, name, fn)


@contextlib.contextmanager
def attempts_recorded(into: list[tuple[bool, float, dict[str, float]]]) -> Iterator[None]:
    """Each attempt the dataset makes appends (passed, CPU seconds, seconds by phase)."""
    original = dataset_module.attempt
    spent: collections.defaultdict[str, float] = collections.defaultdict(float)

    def attempt(*args: Any, **kwargs: Any) -> Any:
        spent.clear()
        started, passed = time.thread_time(), False
        try:
            task = original(*args, **kwargs)
            passed = True
            return task
        finally:
            into.append((passed, time.thread_time() - started, dict(spent)))

    dataset_module.attempt = attempt
    try:
        with timers(spent):
            yield
    finally:
        dataset_module.attempt = original


def _means(rows: list[tuple[bool, float, dict[str, float]]]) -> dict[str, Any]:
    if not rows:
        return {"attempts": 0}
    by_phase: collections.defaultdict[str, float] = collections.defaultdict(float)
    for _, _, spent in rows:
        for label, seconds in spent.items():
            by_phase[label] += seconds
    return {
        "attempts": len(rows),
        "mean_ms": round(1000 * sum(r[1] for r in rows) / len(rows), 2),
        "mean_ms_by_phase": {
            label: round(1000 * by_phase[label] / len(rows), 2) for _, _, label in PHASES
        },
    }


def run(count: int, seed: int, split: str) -> dict[str, Any]:
    """Make ``count`` tasks and split their attempts' CPU time by phase."""
    with warm_dataset(seed, split, count) as ds:
        recorded: list[tuple[bool, float, dict[str, float]]] = []
        tasks: list[tuple[float, int, int]] = []  # (CPU seconds, attempts, index)
        over_goal: list[tuple[int, str, int]] = []  # (attempts, file kind, rows)
        with attempts_recorded(recorded):
            for index in range(count):
                before = len(recorded)
                task = ds.task(split, index)
                made = recorded[before:]
                tasks.append((sum(r[1] for r in made), len(made), index))
                if tasks[-1][0] * 1000 > GOAL_MS:
                    over_goal.append((len(made), task.metadata["kind"], task.metadata["rows"]))
        dropped = ds.stats()["dropped"]
    slowest = sorted(tasks, reverse=True)[: max(1, count // 100)]
    return {
        "count": count,
        "seed": seed,
        "split": split,
        "dropped": dropped,
        "passed": _means([r for r in recorded if r[0]]),
        "failed": _means([r for r in recorded if not r[0]]),
        "over_goal": {
            "goal_ms": GOAL_MS,
            "tasks": len(over_goal),
            "with_more_than_one_attempt": sum(1 for n, _, _ in over_goal if n > 1),
            "single_attempt_over_1000_rows": sum(
                1 for n, _, rows in over_goal if n == 1 and rows > 1000
            ),
            "by_kind": dict(collections.Counter(kind for _, kind, _ in over_goal)),
        },
        "slowest_1pct": {
            "tasks": len(slowest),
            "with_more_than_one_attempt": sum(1 for _, n, _ in slowest if n > 1),
            "rows": [
                {"index": i, "cpu_ms": round(1000 * s, 1), "attempts": n} for s, n, i in slowest
            ],
        },
    }


def main() -> None:
    args = tasks_to_make(__doc__.splitlines()[0])
    print(json.dumps(run(args.count, args.seed, args.split), indent=1))


if __name__ == "__main__":
    main()
