"""Where a task's tables go on disk (its layout) and the two independent ways they are read back.

A layout names the files: one CSV, two CSVs, a CSV beside a workbook
(cross-format), one SQLite database or one workbook with two sheets. The
reference answer is computed twice from the files as written: once through
pandas (``read_pandas``: ``read_csv``, ``read_sql_query``, and for a workbook
pandas' own dtype inference over its cells as ``pd.read_excel`` does, in
``xlsx_pandas``) and once through the standard library alone (``read_plain``), so
a reader quirk (a value pandas reads as missing, a number stored as text) shows up
as a disagreement and the task is dropped.
"""

from __future__ import annotations

import csv
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from analyst_env.datasets.procedural import xlsx_pandas, xlsx_plain
from analyst_env.datasets.procedural.domain_schema import Domain
from analyst_env.datasets.procedural.writers import write_csv, write_sqlite, write_xlsx_fast

LAYOUTS = ("csv", "csv+csv", "csv+xlsx", "sqlite", "excel")
"""Every file layout; ``csv`` alone holds no dimension table, so join templates never use it."""

WORKBOOK_LAYOUTS = frozenset({"csv+xlsx", "excel"})
"""Layouts with an Excel workbook among their files."""


def has_workbook(layout: str) -> bool:
    """Whether ``layout`` writes a workbook: one costs ~10 ms to write and as much to read back
    each way, so such tasks hold fewer rows and are screened before their files are written."""
    return layout in WORKBOOK_LAYOUTS


KIND_OF_LAYOUT = {
    "csv": "csv",
    "csv+csv": "csv",
    "csv+xlsx": "multi",
    "sqlite": "sqlite",
    "excel": "excel",
}


@dataclass(frozen=True)
class Placement:
    """Which file (and table or sheet) holds the fact and the dimension table."""

    fact_file: str
    fact_table: str | None
    dim_file: str | None
    dim_table: str | None


def placement(domain: Domain, layout: str) -> Placement:
    if layout == "csv":
        return Placement(f"{domain.table}.csv", None, None, None)
    if layout == "csv+csv":
        return Placement(f"{domain.table}.csv", None, f"{domain.dim_table}.csv", None)
    if layout == "csv+xlsx":
        return Placement(f"{domain.table}.csv", None, f"{domain.dim_table}.xlsx", domain.dim_table)
    if layout == "sqlite":
        name = f"{domain.name}.sqlite"
        return Placement(name, domain.table, name, domain.dim_table)
    if layout == "excel":
        name = f"{domain.name}.xlsx"
        return Placement(name, domain.table, name, domain.dim_table)
    raise ValueError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")


def describe(p: Placement) -> str:
    """The sentence telling the agent where its data is."""

    def where(file: str, table: str | None) -> str:
        if file.endswith(".sqlite"):
            return f"table `{table}` of the SQLite database `{file}`"
        if file.endswith(".xlsx"):
            return f"sheet `{table}` of the Excel workbook `{file}`"
        return f"the CSV file `{file}`"

    text = f"The records are in {where(p.fact_file, p.fact_table)}"
    if p.dim_file:
        text += f"; the lookup table is in {where(p.dim_file, p.dim_table)}"
    return text + ", in your working directory."


def _table(name: str | None) -> str:
    """The table or sheet name a database or workbook file in a placement always has."""
    if name is None:
        raise ValueError("a database or workbook file in a placement needs a table name")
    return name


def write(p: Placement, fact: pd.DataFrame, dim: pd.DataFrame, directory: Path) -> dict[str, str]:
    """Write the files of ``p`` into ``directory``; return ``{name: path}``."""
    if p.fact_file == p.dim_file:
        path = directory / p.fact_file
        writer = write_sqlite if path.suffix == ".sqlite" else write_xlsx_fast
        writer({_table(p.fact_table): fact, _table(p.dim_table): dim}, path)
        return {p.fact_file: str(path)}
    files = {p.fact_file: str(directory / p.fact_file)}
    write_csv(fact, directory / p.fact_file)
    if p.dim_file:
        files[p.dim_file] = str(directory / p.dim_file)
        if p.dim_file.endswith(".xlsx"):
            write_xlsx_fast({_table(p.dim_table): dim}, directory / p.dim_file)
        else:
            write_csv(dim, directory / p.dim_file)
    return files


def _pandas_one(path: Path, table: str | None) -> pd.DataFrame:
    if path.suffix == ".sqlite":
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return pd.read_sql_query(f'SELECT * FROM "{table}"', con)
        finally:
            con.close()
    if path.suffix == ".xlsx":
        return xlsx_pandas.read_sheets(path, [_table(table)])[_table(table)]
    return pd.read_csv(path)


def read_pandas(p: Placement, directory: Path) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """The fact and dimension tables through pandas, as an analyst would load them."""
    if p.fact_file == p.dim_file and p.fact_file.endswith(".xlsx"):  # one workbook: open it once
        fact_sheet, dim_sheet = _table(p.fact_table), _table(p.dim_table)
        sheets = xlsx_pandas.read_sheets(directory / p.fact_file, [fact_sheet, dim_sheet])
        return sheets[fact_sheet], sheets[dim_sheet]
    fact = _pandas_one(directory / p.fact_file, p.fact_table)
    dim = _pandas_one(directory / p.dim_file, p.dim_table) if p.dim_file else None
    return fact, dim


Rows = list[dict[str, object]]


def _sheet_rows(rows: tuple[tuple[xlsx_plain.Cell, ...], ...]) -> Rows:
    """A sheet's rows as ``{header: cell}``, the header being its first row."""
    if not rows:
        return []
    names = [str(c) for c in rows[0]]
    return [dict(zip(names, r)) for r in rows[1:]]


def _plain_one(path: Path, table: str | None) -> Rows:
    if path.suffix == ".sqlite":
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            cur = con.execute(f'SELECT * FROM "{table}"')
            names = [c[0] for c in cur.description]
            return [dict(zip(names, row)) for row in cur]
        finally:
            con.close()
    if path.suffix == ".xlsx":
        sheet = _table(table)
        return _sheet_rows(xlsx_plain.sheets(path, (sheet,))[sheet])
    with open(path, newline="", encoding="utf-8") as fh:
        return _csv_rows(csv.reader(fh))


def _csv_rows(reader: Iterator[list[str]]) -> Rows:
    """Each row as ``{header: cell}``, as ``csv.DictReader`` gives them (blank lines skipped,
    a short row padded with None, a long row's extra cells under the key None), faster."""
    names = next(reader, None)
    if names is None:
        return []
    width, rows = len(names), []  # type: tuple[int, Rows]
    for row in reader:
        if len(row) == width:
            rows.append(dict(zip(names, row)))
        elif row:
            cells: dict = dict(zip(names, row))
            if len(row) > width:
                cells[None] = row[width:]
            else:
                cells.update(dict.fromkeys(names[len(row) :]))
            rows.append(cells)
    return rows


def read_plain(p: Placement, directory: Path) -> tuple[Rows, Rows | None]:
    """The same tables through the standard library alone, every cell as stored."""
    if p.fact_file == p.dim_file and p.fact_file.endswith(".xlsx"):
        fact_sheet, dim_sheet = _table(p.fact_table), _table(p.dim_table)
        sheets = xlsx_plain.sheets(directory / p.fact_file, (fact_sheet, dim_sheet))
        return _sheet_rows(sheets[fact_sheet]), _sheet_rows(sheets[dim_sheet])
    fact = _plain_one(directory / p.fact_file, p.fact_table)
    dim = _plain_one(directory / p.dim_file, p.dim_table) if p.dim_file else None
    return fact, dim
