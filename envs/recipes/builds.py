"""Build lifecycle: pending -> building -> ready | failed, one build per image hash at a time.

Builds run on background threads; their state lives in SQLite (``builds.sqlite`` in the
environments' state directory), so a restarted server still knows which images are
ready and why one failed. A build that was running when its server stopped is marked
``failed`` ("interrupted by a server restart"), never resumed on its own: a build that
crashed the server must not crash it again on every start. Asking for it again
(``POST /envs/{name}/build``) starts it afresh.

Several servers may share the file (the workers of ``serve --workers N``, a worker
restarted alone, replicas on one state volume), so a running build records its owner
(boot id, PID namespace, pid and the process's start time) and a heartbeat every
``HEARTBEAT_S``. Another server treats it as abandoned once its owner is gone (checked
at once when the owner is in the same PID namespace) or its heartbeat is older than
``STALE_S`` (an owner elsewhere); only then is it marked interrupted or built again.

Each attempt writes its own log file (``logs/<backend>-<hash>.log``, replaced by the
next attempt of the same hash); the log's last lines are the error of a failed build.
"""

from __future__ import annotations

import functools
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from analyst_env.envs.recipes.recipe import Recipe

log = logging.getLogger(__name__)

STATUSES = ("pending", "building", "ready", "failed")

#: ``bake(recipe, out_dir, log=..., progress=...)`` builds the artifact or raises with the reason.
BakeFn = Callable[..., Any]

_POLL_S = 0.2
"""How often ``wait`` reads the state of a build another worker runs."""

HEARTBEAT_S = 5.0
"""How often a running build tells the other servers on the file that it is alive."""

STALE_S = 30.0
"""A build whose heartbeat is older than this, and whose owner cannot be checked, is abandoned."""

INTERRUPTED = "the build was interrupted by a server restart; build again"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS builds (
    backend TEXT NOT NULL,
    hash TEXT NOT NULL,
    status TEXT NOT NULL,
    progress REAL,
    started_at REAL,
    finished_at REAL,
    error TEXT,
    log_path TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    owner TEXT,
    heartbeat_at REAL,
    PRIMARY KEY (backend, hash)
);
CREATE TABLE IF NOT EXISTS deleted_environments (
    name TEXT PRIMARY KEY,
    deleted_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS recipes_generation (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    generation INTEGER NOT NULL
);
INSERT OR IGNORE INTO recipes_generation (id, generation) VALUES (0, 0);
"""


def _identity() -> tuple[str, str]:
    """(boot id, PID namespace) of this process: where its pids mean something."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
        return boot, os.readlink("/proc/self/ns/pid")
    except OSError:
        return "", ""


def _start_time(pid: int) -> str | None:
    """The start time of ``pid`` (clock ticks since boot), None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


_BOOT, _PID_NS = _identity()


@functools.cache
def _owner_of(pid: int) -> str:
    return f"{_BOOT}|{_PID_NS}|{pid}|{_start_time(pid)}"


def owner() -> str:
    """Who runs a build: this process, named for good by its pid and start time (pids are
    reused)."""
    return _owner_of(os.getpid())


def _abandoned(who: str | None, heartbeat_at: float | None) -> bool:
    """Whether a ``building`` row's builder is gone: checked directly when it ran in this PID
    namespace, otherwise (another host or container) by its heartbeat's age."""
    if who == owner():
        return False  # this process: ``Builder`` knows whether its thread runs
    if who:
        boot, pid_ns, pid, started = who.split("|")
        if (boot, pid_ns) == (_BOOT, _PID_NS) and _BOOT:
            return _start_time(int(pid)) != started
    return heartbeat_at is None or time.time() - heartbeat_at > STALE_S


class BuildDB:
    """The SQLite file holding build states, deleted environment names and the recipes'
    generation. Thread-safe, and shared by every worker of ``serve --workers N``: each
    has its own connection, and what must not race between them (claiming a build) is
    one transaction."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._lock = threading.Lock()
        with self._lock:
            self._conn.executescript(_SCHEMA)
            columns = {row[1] for row in self._conn.execute("PRAGMA table_info(builds)")}
            for column, kind in (("owner", "TEXT"), ("heartbeat_at", "REAL")):
                if column not in columns:  # a file written before builds had owners
                    try:
                        self._conn.execute(f"ALTER TABLE builds ADD COLUMN {column} {kind}")
                    except sqlite3.OperationalError:
                        pass  # another server added it meanwhile

    def get(self, backend: str, digest: str) -> dict[str, Any] | None:
        with self._lock:
            cur = self._conn.execute(
                "SELECT * FROM builds WHERE backend=? AND hash=?", (backend, digest)
            )
            row = cur.fetchone()
            return dict(zip([c[0] for c in cur.description], row)) if row else None

    def put(self, backend: str, digest: str, **fields: Any) -> None:
        with self._lock:
            self._conn.execute(
                "INSERT INTO builds (backend, hash, status) VALUES (?, ?, 'pending') "
                "ON CONFLICT(backend, hash) DO NOTHING",
                (backend, digest),
            )
            if fields:
                sets = ", ".join(f"{k}=?" for k in fields)
                self._conn.execute(
                    f"UPDATE builds SET {sets} WHERE backend=? AND hash=?",
                    (*fields.values(), backend, digest),
                )

    def claim(self, backend: str, digest: str, **fields: Any) -> bool:
        """Mark ``digest`` building by this process (with ``fields``) unless a live build of it
        runs already, here or in another process sharing the file; whether this caller got it."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")  # one writer from here to COMMIT
            try:
                row = self._conn.execute(
                    "SELECT status, attempts, owner, heartbeat_at FROM builds "
                    "WHERE backend=? AND hash=?",
                    (backend, digest),
                ).fetchone()
                if row is not None and row[0] == "building" and not _abandoned(row[2], row[3]):
                    self._conn.execute("ROLLBACK")
                    return False
                self._conn.execute(
                    "INSERT INTO builds (backend, hash, status) VALUES (?, ?, 'pending') "
                    "ON CONFLICT(backend, hash) DO NOTHING",
                    (backend, digest),
                )
                fields = {
                    **fields,
                    "status": "building",
                    "attempts": (row[1] if row else 0) + 1,
                    "owner": owner(),
                    "heartbeat_at": time.time(),
                }
                sets = ", ".join(f"{k}=?" for k in fields)
                self._conn.execute(
                    f"UPDATE builds SET {sets} WHERE backend=? AND hash=?",
                    (*fields.values(), backend, digest),
                )
                self._conn.execute("COMMIT")
                return True
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def heartbeat(self, backend: str, digest: str) -> None:
        """This process's build of ``digest`` is still running."""
        with self._lock:
            self._conn.execute(
                "UPDATE builds SET heartbeat_at=? WHERE backend=? AND hash=? AND owner=? "
                "AND status='building'",
                (time.time(), backend, digest, owner()),
            )

    def recipes_generation(self) -> int:
        """A number every change to the recipes on disk increases (``recipes_changed``)."""
        with self._lock:
            return self._conn.execute("SELECT generation FROM recipes_generation").fetchone()[0]

    def recipes_changed(self) -> None:
        """Tell every process holding the recipes in memory to read them again."""
        with self._lock:
            self._conn.execute("UPDATE recipes_generation SET generation = generation + 1")

    def interrupt_abandoned(self, backend: str | None = None, digest: str | None = None) -> int:
        """Mark builds left ``building`` or ``pending`` by a server that is gone as failed (all of
        them, or ``digest``'s); how many."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                where, args = "status IN ('building', 'pending')", []
                if digest is not None:
                    where, args = where + " AND backend=? AND hash=?", [backend, digest]
                rows = self._conn.execute(
                    f"SELECT backend, hash, status, owner, heartbeat_at FROM builds WHERE {where}",
                    args,
                ).fetchall()
                gone = [r[:2] for r in rows if r[2] == "pending" or _abandoned(r[3], r[4])]
                for row_backend, row_hash in gone:
                    self._conn.execute(
                        "UPDATE builds SET status='failed', finished_at=?, progress=NULL, "
                        "error=? WHERE backend=? AND hash=?",
                        (time.time(), INTERRUPTED, row_backend, row_hash),
                    )
                self._conn.execute("COMMIT")
                return len(gone)
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def mark_deleted(self, name: str) -> None:
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO deleted_environments (name, deleted_at) VALUES (?, ?)",
                (name, time.time()),
            )

    def undelete(self, name: str) -> None:
        with self._lock:
            self._conn.execute("DELETE FROM deleted_environments WHERE name=?", (name,))

    def was_deleted(self, name: str) -> bool:
        with self._lock:
            return (
                self._conn.execute(
                    "SELECT 1 FROM deleted_environments WHERE name=?", (name,)
                ).fetchone()
                is not None
            )

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class Builder:
    """Runs builds of one backend's artifacts in the background, at most one per hash.

    Args:
        db: Where build states live.
        backend: The backend whose artifacts are built (part of the state's key).
        images_dir: Artifacts go to ``images_dir/<hash>``.
        logs_dir: Build logs.
        bake: The backend's build function.
        is_built: Whether ``images_dir/<hash>`` still holds a complete artifact; a ``ready``
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

    def state(self, digest: str) -> dict[str, Any]:
        """``{"status", "progress", "elapsed_s", "error", "log_path"}`` of the image ``digest``."""
        row = self.db.get(self.backend, digest)
        if (
            row is not None
            and row["status"] == "building"
            and not self._building_here(digest)
            and _abandoned(row["owner"], row["heartbeat_at"])
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
            }
        status = row["status"]
        if status == "ready" and not self._is_built(self.images_dir / digest):
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
            if not force and self.state(digest)["status"] == "ready":
                return self.state(digest)
            log_path = self.logs_dir / f"{self.backend}-{digest}.log"
            claimed = self.db.claim(
                self.backend,
                digest,
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
                args=(recipe, digest, log_path),
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

    def _run(self, recipe: Recipe, digest: str, log_path: Path) -> None:
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
                self._bake(recipe, self.images_dir / digest, log=write, progress=progress)
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
