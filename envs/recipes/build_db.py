"""The SQLite file behind builds: their states, deleted environment names, the recipes'
generation, and who runs each build.

Several servers may share the file (the workers of ``serve --workers N``, a worker
restarted alone, replicas on one state volume). Each has its own connection; what must
not race between them (claiming a build, interrupting abandoned ones) is one
transaction. A running build records its owner (boot id, PID namespace, pid and the
process's start time) and a heartbeat; another server treats it as abandoned once its
owner is gone (checked at once when the owner is in the same PID namespace) or its
heartbeat is older than ``STALE_S`` (an owner elsewhere).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
    revision INTEGER NOT NULL DEFAULT 0,
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


def abandoned(who: str | None, heartbeat_at: float | None) -> bool:
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
    """One process's connection to the file. Thread-safe."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        # Servers starting together (the workers of ``serve --workers N``) set the file up one
        # at a time: switching a new file to WAL while another connection does the same fails
        # at once with "database is locked" (no busy wait), which ended a worker at start.
        with self._lock, open(path.with_name(path.name + ".setup-lock"), "a") as setup:
            fcntl.flock(setup, fcntl.LOCK_EX)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.executescript(_SCHEMA)
            columns = {row[1] for row in self._conn.execute("PRAGMA table_info(builds)")}
            added = (
                ("owner", "TEXT"),
                ("heartbeat_at", "REAL"),
                ("revision", "INTEGER NOT NULL DEFAULT 0"),
            )
            for column, kind in added:
                if column not in columns:  # a file written before builds had them
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
            self._upsert(backend, digest, fields)

    def claim(self, backend: str, digest: str, **fields: Any) -> bool:
        """Mark ``digest`` building by this process (with ``fields``) unless a live build of it
        runs already, here or in another process sharing the file; whether this caller got it."""
        with self._lock, self._transaction():
            row = self._conn.execute(
                "SELECT status, attempts, owner, heartbeat_at FROM builds "
                "WHERE backend=? AND hash=?",
                (backend, digest),
            ).fetchone()
            if row is not None and row[0] == "building" and not abandoned(row[2], row[3]):
                return False
            mine = {"status": "building", "attempts": (row[1] if row else 0) + 1}
            mine.update(owner=owner(), heartbeat_at=time.time())
            self._upsert(backend, digest, {**fields, **mine})
            return True

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
        with self._lock, self._transaction():
            where, args = "status IN ('building', 'pending')", []
            if digest is not None:
                where, args = where + " AND backend=? AND hash=?", [backend, digest]
            rows = self._conn.execute(
                f"SELECT backend, hash, status, owner, heartbeat_at FROM builds WHERE {where}",
                args,
            ).fetchall()
            gone = [r[:2] for r in rows if r[2] == "pending" or abandoned(r[3], r[4])]
            for row_backend, row_hash in gone:
                self._conn.execute(
                    "UPDATE builds SET status='failed', finished_at=?, progress=NULL, "
                    "error=? WHERE backend=? AND hash=?",
                    (time.time(), INTERRUPTED, row_backend, row_hash),
                )
            return len(gone)

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

    def _upsert(self, backend: str, digest: str, fields: dict[str, Any]) -> None:
        """Set ``fields`` of the row of ``digest``, made ``pending`` first if it is new."""
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

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """One write transaction: no other process writes the file until it commits."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")
