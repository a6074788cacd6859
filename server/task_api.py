"""OpenEnv's Task API (``TaskProvider``) over the runtime's catalogue: splits, counts, tasks.

Mixed into ``AnalystEnvironment``: OpenEnv serves ``/tasks`` from the environment's
own methods. It is discovery only and shows a task's public view (never its gold);
an unknown split is simply empty (``get_task`` then answers 400). A split with an
unbounded dataset (tasks made on demand) is never listed whole, only by range.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from analyst_env.server.runtime import Chain, Runtime

MAX_UNBOUNDED_RANGE = 1000
"""Tasks one Task API range call may ask of a split whose tasks are made on demand."""


class TaskApi:
    """The Task API methods; ``AnalystEnvironment`` provides ``_runtime``."""

    _runtime: Runtime

    def list_splits(self) -> list[str]:
        return self._runtime.splits()

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        tasks = self._tasks_of(split)
        if isinstance(tasks, Chain) and tasks.unbounded:
            # IndexError is what the Task API answers with 400
            raise IndexError(f"split {split!r} is unbounded ({len(tasks)} tasks): ask for a range")
        return self.get_task_range(split, 0, len(tasks))

    def num_tasks(self, split: str) -> int:
        return len(self._tasks_of(split))

    def get_task(self, split: str, index: int) -> dict[str, Any]:
        tasks = self._tasks_of(split)
        if not 0 <= index < len(tasks):
            raise IndexError(f"index {index} out of range for split {split!r} ({len(tasks)} tasks)")
        return self._task_spec(tasks, index)

    def get_task_range(self, split: str, start: int, stop: int) -> list[dict[str, Any]]:
        tasks = self._tasks_of(split)
        if isinstance(tasks, Chain) and tasks.unbounded and stop - start > MAX_UNBOUNDED_RANGE:
            raise IndexError(
                f"split {split!r} makes its tasks on demand: ask for at most "
                f"{MAX_UNBOUNDED_RANGE} at a time"
            )
        return [self._task_spec(tasks, i) for i in range(max(0, start), min(stop, len(tasks)))]

    def _tasks_of(self, split: str) -> Sequence:
        return self._runtime.split(split) if split in self._runtime.splits() else []

    @staticmethod
    def _task_spec(tasks: Sequence, index: int) -> dict[str, Any]:
        return {**tasks[index].public_view(), "index": index}
