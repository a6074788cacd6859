"""Run one SQL query against a SQLite database so that it can do nothing but read, quickly.

The query may be the agent's, and it runs on the host, so it is boxed in: the
database is opened read-only (``mode=ro`` URI), an authorizer allows only reads
and function calls (no ``ATTACH``, ``PRAGMA``, writes or ``load_extension``), a
progress handler stops it after ``timeout_s``, at most ``max_rows`` rows are
fetched, values are capped at 10 MB and the whole result at
``MAX_RESULT_BYTES`` (64 MB, counted row by row as it is fetched, so ``SELECT
zeroblob(9000000) FROM big`` stops after a few rows instead of filling memory).
The server runs scorers in a child process with its own memory limit
(``verifiers/bounded.py``).
"""

from __future__ import annotations

import sqlite3
import time
import urllib.parse
from typing import Any

Row = tuple[Any, ...]

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MAX_ROWS = 100_000
MAX_VALUE_BYTES = 10_000_000
MAX_RESULT_BYTES = 64_000_000

_ALLOWED_ACTIONS = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    sqlite3.SQLITE_RECURSIVE,
}
_DENIED_FUNCTIONS = {"load_extension"}


class SqlRunError(Exception):
    """A query could not be run to completion (error, denied, too slow, too many rows)."""


def _authorize(action: int, arg1: str | None, arg2: str | None, *_: Any) -> int:
    if action not in _ALLOWED_ACTIONS:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _DENIED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def _value_bytes(value: Any) -> int:
    """What a fetched value costs, roughly: its length for text and blobs, 8 bytes otherwise."""
    return len(value) if isinstance(value, (str, bytes)) else 8


def run_readonly(
    db_path: str,
    query: str,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_rows: int = DEFAULT_MAX_ROWS,
    max_bytes: int = MAX_RESULT_BYTES,
) -> list[Row]:
    """Run one query against a read-only connection to ``db_path`` and fetch all rows.

    Text is decoded as the official evaluator does (UTF-8, undecodable bytes dropped).

    Args:
        db_path: Host path of the SQLite database; it is never modified.
        query: One SQL statement.
        timeout_s: Wall-time budget for preparing, running and fetching.
        max_rows: More rows than this is an error.
        max_bytes: A result larger than this (text and blob lengths, 8 bytes per other value)
            is an error.

    Returns:
        The result rows as tuples.

    Raises:
        SqlRunError: On any SQLite error, a denied action, the time limit, the row or the byte
            limit.
    """
    uri = "file:" + urllib.parse.quote(str(db_path)) + "?mode=ro"
    try:
        con = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise SqlRunError(f"cannot open database: {exc}") from None
    deadline = time.monotonic() + timeout_s
    try:
        con.text_factory = lambda b: b.decode(errors="ignore")
        con.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        con.set_authorizer(_authorize)
        con.set_progress_handler(lambda: int(time.monotonic() > deadline), 1000)
        try:
            cur = con.execute(query)
            rows: list[Row] = []
            size = 0
            for row in cur:  # one row at a time: the byte cap is checked before the next is fetched
                rows.append(row)
                size += sum(_value_bytes(v) for v in row)
                if len(rows) > max_rows:
                    raise SqlRunError(f"more than {max_rows} rows")
                if size > max_bytes:
                    raise SqlRunError(f"the result is larger than {max_bytes} bytes")
            return rows
        except sqlite3.Error as exc:
            if time.monotonic() > deadline:
                raise SqlRunError(f"time limit of {timeout_s:g} s exceeded") from None
            raise SqlRunError(f"{type(exc).__name__}: {exc}") from None
        except (MemoryError, OverflowError, ValueError) as exc:
            raise SqlRunError(f"{type(exc).__name__}: {exc}") from None
    finally:
        con.close()
