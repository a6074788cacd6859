"""The ``procedural`` dataset: an unbounded index space, each index made into a task when asked for.

``ProceduralDataset(seed)`` materialises nothing up front. ``task(split, i)``
draws attempt 0 of index i; if it fails a check (``generator.Dropped``) it
draws attempt 1, and so on, so every index names exactly one task and the
drop count is kept. The task's files go into a directory of its own under the
task cache (which the sandbox cannot read), built in a private directory and
renamed into place (``datasets.cache.materialize``), so two sessions asking for
the same index at once both get the complete set. Only the most recent
directories are kept on disk; a task whose files were evicted is made again,
byte for byte, from its seed.

The deployment seed is a server-side secret: task ids are
``procedural-SPLIT-INDEX`` and never carry it, nor does any file or metadata
an episode sees. Someone who knows the seed and the generator can regenerate
every gold answer, so a training deployment should use its own
(``procedural:SEED``, or ``$ANALYST_ENV_PROCEDURAL_SEED``).
"""

from __future__ import annotations

import collections
import hashlib
import json
import logging
import os
import shutil
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from analyst_env.datasets.cache import MANIFEST, materialize
from analyst_env.datasets.procedural.generator import GENERATOR_VERSION, NAME, Dropped, attempt
from analyst_env.datasets.procedural.splits import SPLIT_SIZE, SPLITS
from analyst_env.paths import cache_root
from analyst_env.task_format import Task, answer_references

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 32
KEEP_DIRS = 4096
"""Task directories kept on disk per dataset; older ones are removed (and remade on demand)."""
SEED_ENV = "ANALYST_ENV_PROCEDURAL_SEED"


class DroppedCounts:
    """Thread-safe tally of attempts made and attempts dropped, by reason, and of questions
    drawn again on an attempt's files (``generator.attempt``), by the reason the one before
    failed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.attempts = 0
        self.dropped: collections.Counter[str] = collections.Counter()
        self.redrawn: collections.Counter[str] = collections.Counter()

    def redraw(self, reason: str) -> None:
        with self._lock:
            self.redrawn[reason] += 1

    def add(self, reason: str | None) -> None:
        with self._lock:
            self.attempts += 1
            if reason is not None:
                self.dropped[reason] += 1

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            total = sum(self.dropped.values())
            return {
                "attempts": self.attempts,
                "dropped": total,
                "kept": self.attempts - total,
                "drop_rate": total / self.attempts if self.attempts else 0.0,
                "by_reason": dict(sorted(self.dropped.items())),
                "questions_redrawn": sum(self.redrawn.values()),
                "redrawn_by_reason": dict(sorted(self.redrawn.items())),
            }


class ProceduralDataset:
    """Tasks made on demand from ``(seed, split, index)``; see the module docstring."""

    unbounded = True

    def __init__(
        self, seed: int = 0, cache_dir: str | Path | None = None, keep_dirs: int = KEEP_DIRS
    ) -> None:
        self.name = NAME
        self._seed = int(seed)
        digest = hashlib.sha256(f"{NAME}:{self._seed}".encode()).hexdigest()[:16]
        self.root = (Path(cache_dir) if cache_dir is not None else cache_root()) / (
            f"{NAME}-v{GENERATOR_VERSION}-{digest}"
        )
        self.counts = DroppedCounts()
        self._keep = keep_dirs
        self._recent: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._lock = threading.Lock()

    @property
    def seed(self) -> int:
        """The deployment seed (server side only: never in an id, a file or metadata)."""
        return self._seed

    # ── the catalogue ──
    def splits(self) -> list[str]:
        return list(SPLITS)

    def size(self, split: str) -> int:
        return SPLIT_SIZE if split in SPLITS else 0

    def split(self, name: str) -> SplitView:
        if name not in SPLITS:
            raise KeyError(f"unknown split {name!r}; splits: {', '.join(SPLITS)}")
        return SplitView(self, name)

    def parse_id(self, task_id: str) -> tuple[str, int] | None:
        """``(split, index)`` of an id this dataset makes, else None."""
        prefix, _, rest = task_id.partition("-")
        split, _, index = rest.partition("-")
        if prefix != NAME or split not in SPLITS or not index.isdigit() or index != str(int(index)):
            return None
        return (split, int(index)) if int(index) < SPLIT_SIZE else None

    def task_by_id(self, task_id: str) -> Task:
        parsed = self.parse_id(task_id)
        if parsed is None:
            raise KeyError(task_id)
        return self.task(*parsed)

    # ── making one task ──
    def task(self, split: str, index: int) -> Task:
        """The task at ``index`` of ``split``, its files on disk (made now if they are not)."""
        if split not in SPLITS:
            raise KeyError(f"unknown split {split!r}; splits: {', '.join(SPLITS)}")
        if not 0 <= index < SPLIT_SIZE:
            raise IndexError(
                f"index {index} out of range for split {split!r} (0..{SPLIT_SIZE - 1})"
            )
        final = self.root / f"{split}-{index}"
        if not (final / MANIFEST).is_file():
            materialize(final, lambda tmp: self._build(split, index, tmp))
        self._touch(final)
        record = json.loads((final / MANIFEST).read_text(encoding="utf-8"))
        record["files"] = {n: str(final / rel) for n, rel in record["files"].items()}
        for ref in answer_references(record["answer"]):  # a workbook task's reference (host only)
            ref["path"] = str(final / ref["path"])
        return Task.model_validate(record)

    def _build(self, split: str, index: int, directory: Path) -> None:
        for tries in range(MAX_ATTEMPTS):
            work = directory / f"attempt-{tries}"
            work.mkdir()
            try:
                task = attempt(self._seed, split, index, tries, work, redrawn=self.counts.redraw)
            except Dropped as exc:
                self.counts.add(exc.reason)
                shutil.rmtree(work)
                continue
            except (
                Exception
            ) as exc:  # a generator bug: counted apart, and the index still gets a task
                log.exception("procedural %s-%d attempt %d failed", split, index, tries)
                self.counts.add(f"generator-error:{type(exc).__name__}")
                shutil.rmtree(work)
                continue
            self.counts.add(None)
            for path in work.iterdir():
                path.rename(directory / path.name)
            work.rmdir()
            record = task.model_dump(mode="json") | {"files": {n: n for n in task.files}}
            for ref in answer_references(record["answer"]):
                ref["path"] = str(Path(ref["path"]).relative_to(work))
            (directory / MANIFEST).write_text(
                json.dumps(record, sort_keys=True) + "\n", encoding="utf-8"
            )
            return
        raise RuntimeError(
            f"no attempt of {split} task {index} passed its checks in {MAX_ATTEMPTS} tries"
        )

    def keep_at_least(self, count: int) -> None:
        """Keep at least ``count`` task folders on disk (the newest ones).

        A sample checked as a whole (``validate --sample N``) reads every task's files
        after all of them are made, so none may be evicted before the end.
        """
        with self._lock:
            self._keep = max(self._keep, count)

    def _touch(self, final: Path) -> None:
        """Remember ``final`` as recently used; remove the oldest directories beyond the limit."""
        evict = []
        with self._lock:
            self._recent[final.name] = None
            self._recent.move_to_end(final.name)
            while len(self._recent) > self._keep:
                evict.append(self._recent.popitem(last=False)[0])
        for name in evict:
            shutil.rmtree(self.root / name, ignore_errors=True)

    def facets(self) -> dict[str, list[str]]:
        """The values each searchable field can take."""
        from analyst_env.datasets.procedural.domains import DOMAINS
        from analyst_env.datasets.procedural.files import KIND_OF_LAYOUT
        from analyst_env.datasets.procedural.templates import CATEGORIES

        return {
            "category": list(CATEGORIES),
            "domain": sorted(d.name for d in DOMAINS),
            "level": ["easy", "medium", "hard"],
            "kind": sorted(set(KIND_OF_LAYOUT.values())),
        }

    def search(
        self,
        split: str,
        start: int,
        limit: int,
        where: dict[str, str],
        text: str = "",
        max_made: int = 60,
        max_scanned: int = 20_000,
    ) -> dict[str, Any]:
        """Tasks of ``split`` from index ``start`` on whose metadata matches ``where`` and ``text``.

        Indices whose cheap draw (``attempt_draw.peek``) cannot match are skipped
        without making them; at most ``max_made`` tasks are made per call. The
        answer says where to continue (``next_start``).
        """
        from analyst_env.datasets.procedural.attempt_draw import peek

        peekable = {
            k: v for k, v in where.items() if k in ("category", "domain", "kind", "template") and v
        }
        found: list[Task] = []
        made, index = 0, start
        end = min(start + max_scanned, SPLIT_SIZE)
        while index < end and len(found) < limit and made < max_made:
            drawn = peek(self._seed, split, index) if peekable else {}
            if all(drawn.get(k) == v for k, v in peekable.items()):
                task = self.task(split, index)
                made += 1
                meta = task.metadata
                if all(str(meta.get(k)) == v for k, v in where.items() if v) and (
                    not text or text.lower() in task.instruction.lower()
                ):
                    found.append(task)
            index += 1
        return {"tasks": found, "next_start": index, "exhausted": index >= SPLIT_SIZE}

    def stats(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "splits": {s: self.size(s) for s in SPLITS},
            **self.counts.snapshot(),
        }


class SplitView(Sequence):
    """One split as a (very long) read-only sequence: ``len``, indexing and slices make tasks
    lazily."""

    def __init__(self, dataset: ProceduralDataset, name: str) -> None:
        self.dataset, self.name = dataset, name

    def __len__(self) -> int:
        return self.dataset.size(self.name)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        return self.dataset.task(self.name, index)

    def __iter__(self) -> Iterator[Task]:
        raise TypeError(f"split {self.name!r} of {NAME} is unbounded: index it or slice it")


def from_seed(seed: str | None = None) -> ProceduralDataset:
    """The set ``procedural`` (seed from ``$ANALYST_ENV_PROCEDURAL_SEED``) or ``procedural:SEED``.

    Raises:
        ValueError: ``seed`` is not an integer.
    """
    if seed is None:
        return ProceduralDataset(seed_from_env())
    try:
        return ProceduralDataset(int(seed))
    except ValueError:
        raise ValueError(f"procedural:SEED needs an integer seed, got {seed!r}") from None


def seed_from_env(default: int = 0) -> int:
    """The deployment seed from ``$ANALYST_ENV_PROCEDURAL_SEED`` (the default when unset)."""
    text = os.environ.get(SEED_ENV, "").strip()
    return int(text) if text else default
