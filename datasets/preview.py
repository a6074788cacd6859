"""Cheap shape previews of a task's input files, shown to the agent at reset.

Every ``reset`` describes the task's files, so previews must be fast and must
never fail: a file that cannot be read gets ``{"error": ...}`` instead of an
exception. Results are cached by (path, mtime, size), so an unchanged file is
inspected once per process.

Example:
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> p = os.path.join(d, "t.csv")
    >>> _ = open(p, "w").write("a,b\\n1,2\\n3,4\\n")
    >>> info = describe_file("t.csv", p)
    >>> info.kind, info.preview
    ('csv', {'columns': ['a', 'b'], 'rows': 2})
"""

from __future__ import annotations

import csv
import functools
import json
import os
import sqlite3
import urllib.parse
from typing import Any

from analyst_env.models import FileInfo, FileKind

_KINDS: dict[str, FileKind] = {
    ".csv": "csv",
    ".tsv": "csv",
    ".sqlite": "sqlite",
    ".sqlite3": "sqlite",
    ".db": "sqlite",
    ".xlsx": "excel",
    ".xlsm": "excel",
    ".xls": "excel",
    ".json": "json",
    ".txt": "text",
    ".md": "text",
}

# Above this size CSV rows are counted as lines (fast, but wrong for quoted
# newlines) and the preview says so.
_EXACT_CSV_LIMIT = 64 * 1024 * 1024
_JSON_LIMIT = 16 * 1024 * 1024


def file_kind(name: str) -> FileKind:
    """The file kind guessed from the extension.

    Example:
        >>> file_kind("sales.TSV"), file_kind("db.sqlite3"), file_kind("a.parquet")
        ('csv', 'sqlite', 'other')
    """
    return _KINDS.get(os.path.splitext(name)[1].lower(), "other")


def describe_file(name: str, path: str) -> FileInfo:
    """Describe one input file as the agent sees it.

    Args:
        name: The file's path relative to the episode's working directory.
        path: Where the file is on this host.

    Returns:
        A ``FileInfo`` with kind, size and a shape preview (``{"error": ...}``
        if the file could not be read).
    """
    kind = file_kind(name)
    try:
        st = os.stat(path)
    except OSError as exc:
        return FileInfo(name=name, kind=kind, size_bytes=0, preview={"error": str(exc)})
    preview = _cached_preview(os.path.abspath(path), kind, st.st_mtime_ns, st.st_size)
    return FileInfo(name=name, kind=kind, size_bytes=st.st_size, preview=dict(preview))


@functools.lru_cache(maxsize=2048)
def _cached_preview(path: str, kind: str, mtime_ns: int, size: int) -> dict[str, Any]:
    reader = _PREVIEWERS.get(kind)
    if reader is None:
        return {}
    try:
        return reader(path, size)
    except Exception as exc:  # noqa: BLE001 - a preview must never break reset
        return {"error": f"{type(exc).__name__}: {exc}"}


def _csv_preview(path: str, size: int) -> dict[str, Any]:
    delimiter = "\t" if path.lower().endswith(".tsv") else ","
    with open(path, encoding="utf-8-sig", errors="replace", newline="") as fh:
        reader = csv.reader(fh, delimiter=delimiter)
        header = next(reader, [])
        if size <= _EXACT_CSV_LIMIT:
            rows = sum(1 for row in reader if row)
            return {"columns": header, "rows": rows}
    with open(path, "rb") as fh:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
        fh.seek(max(0, size - 1))
        if size and fh.read(1) != b"\n":
            lines += 1
    return {"columns": header, "rows": max(0, lines - 1), "rows_approximate": True}


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _sqlite_preview(path: str, size: int) -> dict[str, Any]:
    uri = "file:" + urllib.parse.quote(path) + "?mode=ro"
    con = sqlite3.connect(uri, uri=True)
    try:
        names = [
            r[0]
            for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' "
                "ORDER BY name"
            )
        ]
        tables = {}
        for table in names:
            cols = [r[1] for r in con.execute(f"PRAGMA table_info({_quote_ident(table)})")]
            (rows,) = con.execute(f"SELECT COUNT(*) FROM {_quote_ident(table)}").fetchone()
            tables[table] = {"columns": cols, "rows": rows}
        return {"tables": tables}
    finally:
        con.close()


def _excel_preview(path: str, size: int) -> dict[str, Any]:
    import openpyxl  # deferred: only needed for workbooks

    wb = openpyxl.load_workbook(path, read_only=True, data_only=True)
    try:
        sheets = {}
        for ws in wb.worksheets:
            first = next(ws.iter_rows(min_row=1, max_row=1, values_only=True), ())
            columns = ["" if v is None else str(v) for v in first]
            while columns and columns[-1] == "":
                columns.pop()
            max_row = ws.max_row
            if max_row is None:  # dimensions not stored: count
                max_row = sum(1 for _ in ws.iter_rows(values_only=True))
            sheets[ws.title] = {
                "columns": columns,
                "rows": max(0, max_row - 1) if columns else max_row,
            }
        return {"sheets": sheets}
    finally:
        wb.close()


def _json_preview(path: str, size: int) -> dict[str, Any]:
    if size > _JSON_LIMIT:
        return {}
    with open(path, encoding="utf-8", errors="replace") as fh:
        data = json.load(fh)
    if isinstance(data, list):
        return {"type": "array", "length": len(data)}
    if isinstance(data, dict):
        return {"type": "object", "keys": list(data)[:50]}
    return {"type": type(data).__name__}


def _text_preview(path: str, size: int) -> dict[str, Any]:
    with open(path, "rb") as fh:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
    return {"lines": lines}


_PREVIEWERS = {
    "csv": _csv_preview,
    "sqlite": _sqlite_preview,
    "excel": _excel_preview,
    "json": _json_preview,
    "text": _text_preview,
}

__all__ = ["describe_file", "file_kind"]
