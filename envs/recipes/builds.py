"""Build lifecycle: pending -> building -> ready | failed, one build per image hash at a time.

Builds run on background threads; their state lives in SQLite (``builds.sqlite`` in the
environments' state directory), so a restarted server still knows which images are
ready and why one failed. A build that was running when its server stopped is marked
``failed`` ("interrupted by a server restart"), never resumed on its own: a build that
crashed the server must not crash it again on every start. Asking for it again
(``POST /envs/{name}/build``) starts it afresh.

Several servers may share the file (``build_db``): a running build records its owner
and a heartbeat every ``HEARTBEAT_S``, and only a build whose owner is gone is marked
interrupted or built again by another server.

Each attempt writes its own log file (``logs/<backend>-<hash>.log``, replaced by the
next attempt of the same hash); the log's last lines are the error of a failed build.

A forced rebuild of a built image never replaces the folder running episodes use: it
builds the next revision beside it (``images/<hash>.<revision>``, image
``env-<hash>.<revision>``); the previous one goes on serving new episodes while it runs
(and if it fails). Once it is ready every server reads the recipes again (the generation
in ``build_db``), so new episodes start on it and the zygote of the previous one stops
with its last episode. Earlier revisions stay on disk, as images of deleted environments
do.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from analyst_env.envs.recipes.build_db import BuildDB, abandoned
from analyst_env.envs.recipes.recipe import Recipe, build_dir_name, image_name

log = logging.getLogger(__name__)

STATUSES = ("pending", "building", "ready", "failed")

#: ``bake(recipe, out_dir, log=..., progress=...)`` builds the artifact or raises with the reason.
BakeFn = Callable[..., Any]

_POLL_S = 0.2
"""How often ``wait`` reads the state of a build another worker runs."""

HEARTBEAT_S = 5.0
"""How often a running build tells the other servers on the file that it is alive."""


class Builder:
    """Runs builds of one backend's artifacts in the background, at most one per hash.

    Args:
        db: Where build states live.
        backend: The backend whose artifacts are built (part of the state's key).
        images_dir: Artifacts go to ``images_dir/<hash>`` (``<hash>.<revision>`` once rebuilt).
        logs_dir: Build logs.
        bake: The backend's build function.
        is_built: Whether an artifact folder still holds a complete artifact; a ``ready``
            state whose artifact vanished reads as ``pending``.
    """

    def __init__(
        self,
        db: BuildDB,
        backend: str,
        images_dir: Path,
        logs_dir: Path,
        bake: BakeFn,
        is_built: Callable[[Path], bool],
    ) -> None:
        self.db = db
        self.backend = backend
        self.images_dir = images_dir
        self.logs_dir = logs_dir
        self._bake = bake
        self._is_built = is_built
        self._threads: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()
        self._closed = False
        images_dir.mkdir(parents=True, exist_ok=True)
        logs_dir.mkdir(parents=True, exist_ok=True)
        interrupted = db.interrupt_abandoned()
        if interrupted:
            log.warning(
                "%d sandbox environment build(s) were interrupted by a restart; marked failed",
                interrupted,
            )

    def build_dir(self, digest: str, revision: int) -> Path:
        """The folder of revision ``revision`` of the image ``digest``."""
        name = build_dir_name(image_name(digest, revision))
        assert name is not None, f"not an image hash: {digest!r}"
        return self.images_dir / name

    def built(self, digest: str, revision: int) -> bool:
        """Whether revision ``revision`` of ``digest`` is complete on disk."""
        return revision >= 0 and self._is_built(self.build_dir(digest, revision))

    def state(self, digest: str) -> dict[str, Any]:
        """``{"status", "progress", "elapsed_s", "error", "log_path", "revision"}`` of the image
        ``digest`` (``revision``: of the build that is, or is being, made)."""
        row = self.db.get(self.backend, digest)
        if (
            row is not None
            and row["status"] == "building"
            and not self._building_here(digest)
            and abandoned(row["owner"], row["heartbeat_at"])
            and self.db.interrupt_abandoned(self.backend, digest)
        ):
            row = self.db.get(self.backend, digest)
        if row is None:
            return {
                "status": "pending",
                "progress": None,
                "elapsed_s": None,
                "error": None,
                "log_path": None,
                "revision": 0,
            }
        status = row["status"]
        if status == "ready" and not self.built(digest, row["revision"]):
            status = "pending"
        started, finished = row["started_at"], row["finished_at"]
        elapsed = None
        if started is not None:
            elapsed = round(
                (finished if finished and status != "building" else time.time()) - started, 3
            )
        return {
            "status": status,
            "progress": row["progress"]
            if status == "building"
            else (1.0 if status == "ready" else None),
            "elapsed_s": elapsed,
            "error": row["error"] if status == "failed" else None,
            "log_path": row["log_path"],
            "revision": row["revision"],
        }

    def start(self, recipe: Recipe, *, force: bool = False) -> dict[str, Any]:
        """Start building ``recipe``'s image unless it is ready (or ``force``) or already
        building."""
        digest = recipe.image_hash()
        with self._lock:
            if self._closed:
                raise RuntimeError("the builder is shut down")
            running = self._threads.get(digest)
            if running is not None and running.is_alive():
                return self.state(digest)
            state = self.state(digest)
            if not force and state["status"] == "ready":
                return state
            revision = state["revision"]
            if self.built(digest, revision):
                revision += 1  # episodes may run on that one: build the next beside it
            log_path = self.logs_dir / f"{self.backend}-{digest}.log"
            claimed = self.db.claim(
                self.backend,
                digest,
                revision=revision,
                progress=0.0,
                started_at=time.time(),
                finished_at=None,
                error=None,
                log_path=str(log_path),
            )
            if not claimed:  # another worker of this state directory is building it
                return self.state(digest)
            log_path.write_text("")
            thread = threading.Thread(
                target=self._run,
                args=(recipe, digest, revision, log_path),
                name=f"env-build-{digest}",
                daemon=True,
            )
            self._threads[digest] = thread
            thread.start()
        return self.state(digest)

    def _building_here(self, digest: str) -> bool:
        thread = self._threads.get(digest)
        return thread is not None and thread.is_alive()

    def wait(self, digest: str, timeout_s: float | None = None) -> dict[str, Any]:
        """Block until the running build of ``digest`` (if any, here or in another worker) ends,
        or ``timeout_s`` passes; its state."""
        thread = self._threads.get(digest)
        if thread is not None:
            thread.join(timeout_s)
            return self.state(digest)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while self.state(digest)["status"] == "building" and (
            deadline is None or time.monotonic() < deadline
        ):
            time.sleep(_POLL_S)
        return self.state(digest)

    def _run(self, recipe: Recipe, digest: str, revision: int, log_path: Path) -> None:
        started = time.monotonic()
        last_progress = [0.0]
        with open(log_path, "a", encoding="utf-8", buffering=1) as logfile:

            def write(line: str) -> None:
                logfile.write(f"[{time.monotonic() - started:7.1f}s] {line}\n")

            def progress(fraction: float) -> None:
                fraction = max(last_progress[0], min(1.0, float(fraction)))
                last_progress[0] = fraction
                self.db.put(self.backend, digest, progress=round(fraction, 3))

            write(f"building {self.backend} image {digest} for environment {recipe.name!r}")
            done = threading.Event()
            beating = threading.Thread(
                target=self._beat, args=(digest, done), name=f"env-heartbeat-{digest}", daemon=True
            )
            beating.start()
            try:
                self._bake(recipe, self.build_dir(digest, revision), log=write, progress=progress)
            except Exception as exc:
                message = str(exc) or type(exc).__name__
                write(f"FAILED: {message}")
                self.db.put(
                    self.backend, digest, status="failed", error=message, finished_at=time.time()
                )
                return
            finally:
                done.set()
            write(f"ready in {time.monotonic() - started:.1f}s")
            self.db.put(
                self.backend,
                digest,
                status="ready",
                progress=1.0,
                error=None,
                finished_at=time.time(),
            )
            # The image a recipe's episodes start on changed: every server reads them again.
            self.db.recipes_changed()

    def _beat(self, digest: str, done: threading.Event) -> None:
        while not done.wait(HEARTBEAT_S):
            try:
                self.db.heartbeat(self.backend, digest)
            except sqlite3.Error as exc:  # e.g. the file is busy: the next beat tries again
                log.warning("could not record the heartbeat of build %s: %s", digest, exc)

    def join(self, timeout_s: float = 5.0) -> None:
        """Wait up to ``timeout_s`` for running builds (daemon threads die with the process)."""
        with self._lock:
            threads = list(self._threads.values())
        deadline = time.monotonic() + timeout_s
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop accepting builds; wait briefly for running ones."""
        with self._lock:
            self._closed = True
        self.join(timeout_s)
