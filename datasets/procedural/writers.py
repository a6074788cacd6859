"""Byte-deterministic writers for generated CSV, SQLite and Excel files.

One seed always yields the same bytes, so a cached task can be checked or made again
anywhere. CSV and SQLite output is deterministic already; an ``.xlsx`` file is a zip
archive stamped with the current time, so :func:`write_xlsx_fast` (XlsxWriter, one pass,
no re-zip) pins every timestamp.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime
from pathlib import Path

import pandas as pd

_FIXED_TIME = (2024, 1, 1, 0, 0, 0)


def write_csv(df: pd.DataFrame, path: Path) -> None:
    """Write ``df`` as a UTF-8 CSV with a header and no index."""
    df.to_csv(path, index=False, lineterminator="\n")


def write_sqlite(tables: dict[str, pd.DataFrame], path: Path) -> None:
    """Write each frame as a table of a new SQLite database, in dict order."""
    con = sqlite3.connect(path)
    try:
        con.execute(
            "PRAGMA synchronous = OFF"
        )  # a half-written set is never renamed into the cache
        for name, df in tables.items():
            df.to_sql(name, con, index=False)
        con.commit()
    finally:
        con.close()


def _cell(value: object) -> object:
    if value is None or (isinstance(value, float) and value != value):
        return None
    if hasattr(value, "item"):  # numpy scalar -> Python scalar
        return value.item()
    return value


def write_xlsx_fast(sheets: dict[str, pd.DataFrame], path: Path) -> None:
    """Write each frame as a sheet (header in row 1), byte-deterministic, with XlsxWriter.

    Text stays text (never turned into a
    formula, a number or a link), numbers are numbers, a missing value is an empty
    cell, a date or time gets a date format (openpyxl reads it back as a datetime).
    """
    import xlsxwriter

    wb = xlsxwriter.Workbook(
        str(path),
        {
            "strings_to_formulas": False,
            "strings_to_numbers": False,
            "strings_to_urls": False,
            "default_date_format": "yyyy-mm-dd hh:mm:ss",
            "in_memory": True,  # no temporary file per part: ~3x faster on a small workbook
        },
    )
    wb.set_properties({"author": "analyst_env generator", "created": datetime(*_FIXED_TIME)})
    try:
        for name, df in sheets.items():
            ws = wb.add_worksheet(name)
            ws.write_row(0, 0, [str(c) for c in df.columns])
            for r, row in enumerate(df.itertuples(index=False, name=None), start=1):
                for c, value in enumerate(row):
                    cell = _cell(value)
                    if cell is None or cell is pd.NaT:
                        continue
                    if isinstance(cell, pd.Timestamp):
                        cell = cell.to_pydatetime()
                    ws.write(r, c, cell)
    finally:
        wb.close()
