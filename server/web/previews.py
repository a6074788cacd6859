"""Head-of-file previews of a task's input files for the /web task page.

``datasets/preview.py`` gives the shape the agent sees at reset (columns, row
counts); a person checking a task also wants to see the first rows, the SQLite
schema and each Excel sheet. These readers are bounded (a few rows, a few KB of
text, cells cut to a fixed width) so any file previews in milliseconds, and
every failure becomes ``{"error": ...}`` rather than an exception.

Only the task's declared input files are ever read: callers look the path up
in ``task.files`` by name, so no request can reach any other path.
"""

from __future__ import annotations

import csv
import itertools
import sqlite3
import urllib.parse
from typing import Any

from analyst_env.datasets.preview import file_kind

MAX_ROWS = 50
MAX_CELL_CHARS = 200
MAX_TEXT_BYTES = 8192
MAX_TABLES = 30


def _cell(value: Any) -> Any:
    if value is None or isinstance(value, (int, float, bool)):
        return value
    text = value.hex() if isinstance(value, bytes) else str(value)
    return text if len(text) <= MAX_CELL_CHARS else text[:MAX_CELL_CHARS] + "…"


def head_preview(name: str, path: str, rows: int = 10) -> dict[str, Any]:
    """The first ``rows`` rows (at most ``MAX_ROWS``) of one input file, by kind.

    Returns:
        ``{"kind", "columns", "rows"}`` for CSV; ``{"kind", "tables": [{"name",
        "sql", "columns": [{"name", "type"}], "rows", "row_count"}]}`` for SQLite;
        ``{"kind", "sheets": [{"name", "rows", "max_row", "max_column"}]}`` for
        Excel; ``{"kind", "text", "truncated"}`` for text and JSON; plus
        ``{"error": ...}`` when the file cannot be read.
    """
    rows = max(1, min(int(rows), MAX_ROWS))
    kind = file_kind(name)
    reader = _READERS.get(kind)
    if reader is None:
        return {"kind": kind, "note": "no preview for this file type"}
    try:
        return {"kind": kind, **reader(path, rows)}
    except Exception as exc:  # noqa: BLE001 - a preview is best effort, never a server error
        return {"kind": kind, "error": f"{type(exc).__name__}: {exc}"}


def _csv_head(path: str, rows: int) -> dict[str, Any]:
    delimiter = "\t" if path.lower().endswith(".tsv") else ","
    with open(path, encoding="utf-8-sig", errors="replace", newline="") as fh:
        reader = csv.reader(fh, delimiter=delimiter)
        header = next(reader, [])
        body = [[_cell(v) for v in row] for row in itertools.islice(reader, rows)]
    return {"columns": [_cell(c) for c in header], "rows": body}


def _sqlite_head(path: str, rows: int) -> dict[str, Any]:
    con = sqlite3.connect("file:" + urllib.parse.quote(path) + "?mode=ro", uri=True)
    try:
        tables = []
        listing = con.execute(
            "SELECT name, sql FROM sqlite_master WHERE type IN ('table', 'view') "
            "AND name NOT LIKE 'sqlite_%' ORDER BY type, name"
        ).fetchall()
        for table, sql in listing[:MAX_TABLES]:
            quoted = '"' + table.replace('"', '""') + '"'
            columns = [
                {"name": r[1], "type": r[2]} for r in con.execute(f"PRAGMA table_info({quoted})")
            ]
            head = [
                [_cell(v) for v in r]
                for r in con.execute(f"SELECT * FROM {quoted} LIMIT ?", (rows,))
            ]
            (count,) = con.execute(f"SELECT COUNT(*) FROM {quoted}").fetchone()
            tables.append(
                {"name": table, "sql": sql, "columns": columns, "rows": head, "row_count": count}
            )
        return {"tables": tables, "more_tables": max(0, len(listing) - MAX_TABLES)}
    finally:
        con.close()


def _excel_head(path: str, rows: int) -> dict[str, Any]:
    import openpyxl  # deferred: only needed for workbooks

    wb = openpyxl.load_workbook(path, read_only=True, data_only=True)
    try:
        sheets = []
        for ws in wb.worksheets[:MAX_TABLES]:
            head = [[_cell(v) for v in r] for r in ws.iter_rows(max_row=rows + 1, values_only=True)]
            width = max((len(r) for r in head), default=0)
            while width and all(len(r) < width or r[width - 1] is None for r in head):
                width -= 1
            sheets.append(
                {
                    "name": ws.title,
                    "rows": [r[:width] for r in head],
                    "max_row": ws.max_row,
                    "max_column": ws.max_column,
                }
            )
        return {"sheets": sheets}
    finally:
        wb.close()


def _text_head(path: str, rows: int) -> dict[str, Any]:
    with open(path, "rb") as fh:
        data = fh.read(MAX_TEXT_BYTES + 1)
    return {
        "text": data[:MAX_TEXT_BYTES].decode("utf-8", errors="replace"),
        "truncated": len(data) > MAX_TEXT_BYTES,
    }


_READERS = {
    "csv": _csv_head,
    "sqlite": _sqlite_head,
    "excel": _excel_head,
    "json": _text_head,
    "text": _text_head,
}
