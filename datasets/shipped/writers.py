"""Byte-deterministic writers for generated CSV, SQLite and Excel files.

The starter set promises that one seed always yields the same bytes, so a
cached copy can be checked or regenerated anywhere. CSV and SQLite output is
deterministic already; ``.xlsx`` files are zip archives stamped with the
current time, so the Excel writers pin every timestamp.

There are two Excel writers with the same cells: :func:`write_xlsx`
(openpyxl) made the starter set's workbooks and keeps their bytes as they
are; :func:`write_xlsx_fast` (XlsxWriter, one pass, no re-zip) is what the
procedural generator writes at every reset, in about two thirds of the time.
"""

from __future__ import annotations

import io
import re
import sqlite3
import zipfile
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


def write_xlsx(sheets: dict[str, pd.DataFrame], path: Path) -> None:
    """Write each frame as a sheet (header in row 1) with pinned zip and document timestamps."""
    from openpyxl import Workbook

    wb = Workbook()
    wb.remove(wb.active)
    for name, df in sheets.items():
        ws = wb.create_sheet(title=name)
        ws.append([str(c) for c in df.columns])
        for row in df.itertuples(index=False, name=None):
            ws.append([_cell(v) for v in row])
    wb.properties.creator = "analyst_env starter generator"
    wb.properties.created = datetime(*_FIXED_TIME)
    wb.properties.modified = datetime(*_FIXED_TIME)
    buf = io.BytesIO()
    wb.save(buf)
    with zipfile.ZipFile(buf) as zin, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename == "docProps/core.xml":
                data = re.sub(
                    rb"(<dcterms:(?:created|modified)[^>]*>)[^<]*",
                    rb"\g<1>2024-01-01T00:00:00Z",
                    data,
                )
            info = zipfile.ZipInfo(item.filename, date_time=_FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zout.writestr(info, data)


def write_xlsx_fast(sheets: dict[str, pd.DataFrame], path: Path) -> None:
    """Write each frame as a sheet (header in row 1), byte-deterministic, with XlsxWriter.

    Cells are what :func:`write_xlsx` writes: text stays text (never turned into a
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
