"""What all sessions of one server share: settings, the task catalogue, the sandbox backend,
and the parts every session feeds (live view, metrics, trajectory store, environments).

Environments are created per session (and per stateless HTTP request), so they
must be cheap; everything expensive to build lives here and is built once.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from analyst_env.datasets import Dataset, Task, describe_file, load_dataset
from analyst_env.envs.backends import make_backend
from analyst_env.envs.sandbox import SandboxBackend
from analyst_env.models import FileInfo
from analyst_env.server.allocator import return_freed_memory
from analyst_env.server.curriculum import for_settings
from analyst_env.server.episode import Limits
from analyst_env.server.live import LiveHub
from analyst_env.server.metrics import ServerMetrics
from analyst_env.server.peers import session_prefix
from analyst_env.server.settings import Settings
from analyst_env.server.tools import TOOLS
from analyst_env.server.trajectories import TrajectoryStore
from analyst_env.verifiers.recalc import recalculation_refusal

if TYPE_CHECKING:
    from analyst_env.envs.recipes.service import EnvironmentService


def raise_open_files_limit() -> int:
    """Raise this process's soft limit on open files to its hard limit; return the new limit.

    Each live episode holds a WebSocket, a kernel socket and a pidfd; with the common
    soft limit of 1024 a server runs out of descriptors at about 250 episodes.
    """
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = 1 << 20 if hard == resource.RLIM_INFINITY else hard
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft


UNBOUNDED_DRAW_SPLIT = "train"
"""The split of an unbounded set a reset without ``split`` draws from (see ``all_tasks``)."""


class TaskNotFoundError(KeyError):
    """A reset asked for a task the server does not serve."""

    def __str__(self) -> str:
        return str(self.args[0])


class TaskUnavailableError(TaskNotFoundError):
    """A reset asked for a task this server cannot score (no LibreOffice for a workbook task)."""


DRAW_ATTEMPTS = 64
"""Tasks a seed draw looks at, from the drawn one on, before it gives up on finding one this
server can score (without LibreOffice about one procedural task in ten is a workbook task)."""


def _servable(task: Task) -> Task:
    """``task``, unless this server cannot score it: then the reset is refused with the reason."""
    reason = recalculation_refusal(task)
    if reason:
        raise TaskUnavailableError(reason)
    return task


def _draw(pool: Sequence[Task], seed: int | None) -> Task:
    """The task a seed draws from ``pool``: the first this server can score, from the drawn index
    on. A bounded set's unscorable tasks are never in the pool; an unbounded set's are made on
    demand, so they are stepped over here, deterministically for a given seed."""
    start = random.Random(seed).randrange(len(pool))
    for step in range(min(DRAW_ATTEMPTS, len(pool))):
        task = pool[(start + step) % len(pool)]
        if not recalculation_refusal(task):
            return task
    return _servable(pool[start])


class Chain(Sequence):
    """Several task sequences read as one, without copying (an unbounded split is one of them)."""

    def __init__(self, parts: list[Sequence]) -> None:
        self.parts = [p for p in parts if len(p)]

    def __len__(self) -> int:
        return sum(len(p) for p in self.parts)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        for part in self.parts:
            if index < len(part):
                return part[index]
            index -= len(part)
        raise IndexError(index)

    @property
    def unbounded(self) -> bool:
        return any(not isinstance(p, list) for p in self.parts)


class Runtime:
    """Shared, thread-safe server state: read-only after construction, but for the parts
    sessions feed, each thread-safe itself.

    Attributes:
        live: What ``/web``'s live view shows of every session.
        metrics: The counters and histograms of ``/metrics``.
        trajectories: Where finished episodes are recorded (None: recording is off).
        environments: The sandbox environments of ``/envs`` (set by ``mount_envs``;
            None: tasks run in the image they name).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        backend: SandboxBackend | None = None,
        datasets: list[Dataset] | None = None,
    ) -> None:
        self.settings = settings
        self.live = LiveHub(prefix=session_prefix())  # w<index>- in a worker of several
        self.metrics = ServerMetrics(TOOLS)
        self.trajectories = TrajectoryStore.for_settings(settings)
        self.environments: EnvironmentService | None = None
        raise_open_files_limit()
        return_freed_memory()
        self.backend = backend if backend is not None else make_backend(settings)
        if datasets is None:
            datasets = [
                load_dataset(spec.strip()) for spec in settings.dataset.split(",") if spec.strip()
            ]
        self.unbounded: list[Any] = [ds for ds in datasets if ds.unbounded]
        """Datasets that make their tasks on demand (``procedural``): never listed, only indexed."""
        bounded = [ds for ds in datasets if not ds.unbounded]
        self.tasks: list[Task] = [t for ds in bounded for t in ds.tasks]
        self._by_id = {t.id: t for t in self.tasks}
        if len(self._by_id) != len(self.tasks):
            raise ValueError("task ids must be unique across the served datasets")
        self.quarantined: list[Task] = [t for t in self.tasks if t.quarantine_reason]
        """Upstream tasks with a broken gold: listed and served by id, drawn only if allowed."""
        self.refused: list[Task] = [t for t in self.tasks if recalculation_refusal(t)]
        """Tasks this server cannot score (a workbook task without LibreOffice): never served."""
        refused = {t.id for t in self.refused}
        self.drawable: list[Task] = [
            t
            for t in self.tasks
            if t.id not in refused and (settings.serve_quarantined or not t.quarantine_reason)
        ]
        """What a reset without ``task_id`` draws from (by seed, or by split and index)."""
        self._splits: dict[str, list[Task]] = {}
        for t in self.tasks:
            self._splits.setdefault(t.split, [])
        for t in self.drawable:
            self._splits[t.split].append(t)
        self.limits = Limits(
            cell_timeout_s=settings.cell_timeout_s,
            shell_timeout_s=settings.shell_timeout_s,
            output_limit_chars=settings.output_limit_chars,
            sql_max_rows=settings.sql_max_rows,
            max_answer_bytes=settings.max_answer_bytes,
            score_timeout_s=settings.score_timeout_s,
            score_memory_mb=settings.score_memory_mb,
            max_scored_file_mb=settings.max_scored_file_mb,
            scoring_profile=settings.scoring_profile,
        )
        self.curriculum = for_settings(settings, self.unbounded)
        """Chooses procedural depth per client from its rewards (None: off)."""

    # ── task catalogue ──────────────────────────────────────────────────────
    def splits(self) -> list[str]:
        return sorted(set(self._splits).union(*(ds.splits() for ds in self.unbounded)))

    def split(self, name: str) -> Sequence[Task]:
        """The split's tasks: a list, or a lazy ``Chain`` when an unbounded dataset has it."""
        lazy = [ds.split(name) for ds in self.unbounded if name in ds.splits()]
        if not lazy:
            try:
                return self._splits[name]
            except KeyError:
                known = self.splits()
                raise TaskNotFoundError(f"unknown split {name!r}; splits: {known}") from None
        return Chain([self._splits.get(name, []), *lazy])

    def all_tasks(self) -> Sequence[Task]:
        """Every task a reset may draw, bounded sets first (lazy when an unbounded set is served).

        Quarantined tasks are left out unless ``serve_quarantined`` (see :attr:`drawable`).
        Of an unbounded set only ``train`` is drawn: its held-out splits (``test``, ``ood``)
        are as long as ``train``, so drawing over all of them would hand a training reset a
        held-out task two times in three; they are served when a reset names the split.
        """
        if not self.unbounded:
            return self.drawable
        drawn = [
            ds.split(UNBOUNDED_DRAW_SPLIT)
            for ds in self.unbounded
            if UNBOUNDED_DRAW_SPLIT in ds.splits()
        ]
        return Chain([self.drawable, *drawn])

    def task(self, task_id: str) -> Task:
        try:
            return self._by_id[task_id]
        except KeyError:
            for ds in self.unbounded:
                if ds.parse_id(task_id) is not None:
                    return ds.task_by_id(task_id)
            import difflib

            close = difflib.get_close_matches(task_id, self._by_id, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise TaskNotFoundError(f"unknown task_id {task_id!r}.{hint}") from None

    def select(
        self,
        *,
        task_id: str | None,
        split: str | None,
        index: int | None,
        seed: int | None,
    ) -> Task:
        """The task a reset asked for: by id, by (split, index), or drawn by seed."""
        if task_id is not None:
            if split is not None or index is not None:
                raise ValueError("pass either task_id or split/index, not both")
            return _servable(self.task(task_id))
        pool = self.split(split) if split is not None else self.all_tasks()
        if not pool:
            where = f" in split {split!r}" if split is not None else ""
            refused = [t for t in self.refused if split is None or t.split == split]
            if refused:
                raise TaskUnavailableError(
                    f"no task{where} can be drawn: {recalculation_refusal(refused[0])} "
                    f"({len(refused)} such task(s))"
                )
            held = [t for t in self.quarantined if split is None or t.split == split]
            if held:
                raise TaskNotFoundError(
                    f"no task{where} can be drawn: its {len(held)} task(s) are quarantined "
                    "(broken upstream gold, metadata gold_status); reset one by task_id, or "
                    "set ANALYST_ENV_SERVE_QUARANTINED=1 to draw them"
                )
            raise TaskNotFoundError("the server has no tasks to serve")
        if index is not None:
            if not 0 <= index < len(pool):
                raise IndexError(f"index {index} out of range for {len(pool)} task(s)")
            return _servable(pool[index])
        return _draw(pool, seed)

    def describe_files(self, task: Task) -> list[FileInfo]:
        return [describe_file(name, path) for name, path in sorted(task.files.items())]

    def close(self) -> None:
        self.backend.close()
