"""A generated workbook's sheets as ``pd.read_excel`` gives them, without openpyxl's parse.

Why: reading a task's workbook back through ``pd.read_excel`` (openpyxl) took ~9 ms of an
excel task's ~32 ms, most of it openpyxl loading the style sheet, theme and shared strings
before the first cell. ``pd.read_excel`` is two steps: openpyxl's cells turned into a grid
(``OpenpyxlReader.get_sheet_data``: an empty cell is ``""``, an integral number an
``int``, trailing empty cells and rows trimmed, rows padded to the widest) and pandas'
own ``TextParser`` over that grid, which infers every dtype. This module takes the cells
from ``xlsx_plain`` (the workbook reader of the plain reading, which reads what the
generator writes and refuses anything else), builds the same grid and hands it to the same
``TextParser``: the frames are the same, at about a third of the cost.

``tests/datasets/test_xlsx_pandas.py`` checks frame for frame, dtypes included, that this
gives what ``pd.read_excel(path, engine="openpyxl")`` gives for 40 generated workbooks (of
at least ten templates) and for edge values. A workbook the plain reader refuses is read by
``pd.read_excel``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd
from pandas.errors import EmptyDataError
from pandas.io.parsers import TextParser

from analyst_env.datasets.procedural import xlsx_plain

OPENPYXL = "openpyxl"
"""The reader ``pd.read_excel`` uses for ``.xlsx`` by default: the one an agent gets."""


def _cell(value: xlsx_plain.Cell) -> object:
    """One cell as pandas' openpyxl reader converts it (``_convert_cell``)."""
    if value is None:
        return ""
    if type(value) is float:  # bools are ints too, and pandas leaves them alone
        whole = int(value)
        return whole if whole == value else value
    return value


def _grid(rows: Iterable[tuple[xlsx_plain.Cell, ...]]) -> list[list[object]]:
    """The rows as ``get_sheet_data`` lays them out: trailing empty cells trimmed, then every
    row padded with ``""`` to the widest (``xlsx_plain`` already ends at the last row that
    holds a value, where pandas trims the trailing empty rows)."""
    grid: list[list[object]] = []
    for row in rows:
        cells = [_cell(v) for v in row]
        while cells and cells[-1] == "":
            cells.pop()
        grid.append(cells)
    if grid:
        width = max(len(r) for r in grid)
        grid = [r + [""] * (width - len(r)) for r in grid]
    return grid


def _frame(grid: list[list[object]]) -> pd.DataFrame:
    """``TextParser`` with the options ``read_excel`` passes by default (header row 0)."""
    try:
        return TextParser(grid, header=0, skip_blank_lines=False).read()
    except EmptyDataError:
        return pd.DataFrame()


def read_sheets(path: Path, sheets: Sequence[str]) -> dict[str, pd.DataFrame]:
    """``pd.read_excel(path, sheet_name=list(sheets), engine="openpyxl")``, for a workbook
    the generator wrote."""
    try:
        grids = {name: _grid(rows) for name, rows in xlsx_plain.sheets(path, tuple(sheets)).items()}
    except xlsx_plain.UnsupportedWorkbook:
        return pd.read_excel(path, sheet_name=list(sheets), engine=OPENPYXL)
    return {name: _frame(grid) for name, grid in grids.items()}


__all__ = ["OPENPYXL", "read_sheets"]
