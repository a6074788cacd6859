"""SheetCopilot's ``cells.values`` rule: one workbook's sheets against one reference's.

Upstream (``agent/utils/compare_sheets.py``) opens the result and each accepted
reference in Excel and, for every sheet its check list enables, compares the
table that starts at A1 column by column: the table's extent is
``min(A1.End(xlDown), UsedRange.Rows)`` rows by ``min(A1.End(xlToRight),
UsedRange.Columns)`` columns and must be the same in both; each reference column
is paired with the first unused result column that has the same header; cells
must have the same type, strings equal after ``strip()``, numbers
``np.allclose(atol=1e-8)``, anything else equal. Over 200 rows, every 100th row
is checked. The worksheet counts must match.

This module is that rule over openpyxl workbooks, apart from the scorer that
reads the agent's file and recalculates it
(:mod:`~analyst_env.verifiers.workbook_match`), because loaders use the rule on
their own: the quarantine checks a reference against its siblings, and the
SheetCopilot loader refuses check lists it cannot score. Numbers compare as
floats (Excel COM returns every number as a float); ``UsedRange`` is the
bounding box of non-empty cells (openpyxl cannot see formatting-only cells the
way Excel does). A reference cell accepts either its cached value or the value
a recalculation gave the same formula.

A formula cell saved without its value and not recalculated, in a reference or
in the agent's workbook, holds :data:`UNCOMPUTED`, which equals nothing, so the
check fails there with the reason (before, such a reference cell was left
unchecked, and a workbook whose formulas were all ``=1+1`` matched references
saved without cached values).

Example:
    >>> grid = {(1, 1): "Week", (2, 1): "Week 1", (1, 2): "Sales", (2, 2): 5.0}
    >>> table_extent(grid)
    (2, 2)
    >>> cell_equal(5.0, 5.000000001), cell_equal(" a ", "a"), cell_equal(5.0, "5")
    (True, True, False)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

TOLERANCE = 1e-8
MAX_ROW, MAX_COL = 1_048_576, 16_384

Grid = dict[tuple[int, int], Any]
"""A sheet's non-empty cells: ``{(row, column): value}``, 1-based."""


class Uncomputed:
    """A formula cell with no value: saved without one and not recalculated.

    It stands in the grid so the cell is not taken for empty, and it equals no
    value (not even itself under :func:`cell_equal`), so it can never match.
    """

    def __repr__(self) -> str:
        return "a formula without a computed value"


UNCOMPUTED = Uncomputed()


def normalize_value(value: Any) -> Any:
    """A cell value as Excel COM would hand it over: every number a float, text and dates as-is.

    Example:
        >>> normalize_value(3), normalize_value(True), normalize_value("")
        (3.0, True, None)
    """
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, (int, float, np.integer, np.floating)):
        return float(value)
    if isinstance(value, str) and value == "":
        return None
    return value


def stored_cells(ws) -> Iterable[Any]:
    """The cells an openpyxl worksheet holds, without the empty ones between them.

    ``ws.iter_rows()`` makes a cell for every position of the bounding box: a 5 KB workbook
    with one value in A1 and one in XFD1048576 cost it 1.7e10 cells (minutes, then the
    memory limit). The worksheet's own store has only the cells the file wrote.
    """
    cells = getattr(ws, "_cells", None)
    if isinstance(cells, dict):
        return list(cells.values())
    return (cell for row in ws.iter_rows() for cell in row)


def sheet_grid(ws) -> Grid:
    """The non-empty cells of an openpyxl worksheet, values normalized."""
    grid: Grid = {}
    for cell in stored_cells(ws):
        value = normalize_value(cell.value)
        if value is not None:
            grid[(cell.row, cell.column)] = value
    return grid


def _end(occupied: set[int], limit: int) -> int:
    """Excel's ``Range.End`` from index 1 towards ``limit`` over the occupied indexes."""
    if 1 in occupied and 2 in occupied:
        i = 2
        while i + 1 in occupied:
            i += 1
        return i
    below = [i for i in occupied if i > 1]
    return min(below) if below else limit


def table_extent(grid: Grid) -> tuple[int, int]:
    """Rows and columns upstream compares: ``min(A1.End, UsedRange size)`` each way.

    Example:
        >>> table_extent({(1, 1): "h", (2, 1): 1.0, (3, 1): 2.0, (5, 1): 9.0, (1, 2): "x"})
        (3, 2)
        >>> table_extent({})
        (1, 1)
    """
    if not grid:
        return 1, 1
    rows = [r for r, _ in grid]
    cols = [c for _, c in grid]
    used_rows = max(rows) - min(rows) + 1
    used_cols = max(cols) - min(cols) + 1
    down = _end({r for r, c in grid if c == 1}, MAX_ROW)
    right = _end({c for r, c in grid if r == 1}, MAX_COL)
    return min(down, used_rows), min(right, used_cols)


def cell_equal(gold: Any, got: Any) -> bool:
    """Upstream's cell rule: same type, then strip-equal strings, allclose numbers, else ==.

    A cell whose value is unknown (:data:`UNCOMPUTED`) equals nothing."""
    if isinstance(gold, Uncomputed) or isinstance(got, Uncomputed):
        return False
    if type(gold) is not type(got):
        return False
    if isinstance(gold, str):
        return gold.strip() == got.strip()
    if isinstance(gold, float):
        return bool(np.allclose(gold, got, atol=TOLERANCE))
    return gold == got


def _accepts(options: Iterable[Any], got: Any) -> bool:
    return any(cell_equal(g, got) for g in options)


def compare_sheet(gold: dict[tuple[int, int], tuple[Any, ...]], result: Grid) -> str | None:
    """Compare one sheet column by column; ``None`` if it matches, else the reason.

    Args:
        gold: Reference cells, each with the values it accepts (cached, recalculated).
        result: The result sheet's cells.
    """
    first = {k: v[0] for k, v in gold.items() if v}
    n_rows, n_cols = table_extent(first)
    got_rows, got_cols = table_extent(result)
    if (n_rows, n_cols) != (got_rows, got_cols):
        return f"the table is {got_rows}x{got_cols}; no reference has that size"
    used: set[int] = set()
    step = 100 if n_rows > 200 else 1
    for col in range(1, n_cols + 1):
        header = gold.get((1, col), (None,))
        match = next(
            (
                m
                for m in range(1, n_cols + 1)
                if m not in used and _accepts(header, result.get((1, m)))
            ),
            None,
        )
        if match is None:
            return f"column {col} of the reference has no matching column"
        used.add(match)
        for row in range(1, n_rows + 1, step):
            want = gold.get((row, col), (None,))
            got = result.get((row, match))
            if UNCOMPUTED in want:
                return (
                    f"row {row}, column {col} of the reference is a formula saved without its "
                    "value and nothing recalculated it: the cell cannot be checked"
                )
            if isinstance(got, Uncomputed):
                return (
                    f"row {row}, column {match}: a formula without a computed value (the "
                    "workbook was not recalculated): the cell cannot be checked"
                )
            if not _accepts(want, got):
                return f"row {row}, column {match}: the value {got!r} is not the expected one"
    return None


def _gold_cells(cached: Grid, recalculated: Grid) -> dict[tuple[int, int], tuple[Any, ...]]:
    """Each reference cell with the values it accepts: cached first, then the engine's if
    different. A cell whose only value is :data:`UNCOMPUTED` keeps it (it fails the check)."""
    cells = {}
    for key in cached.keys() | recalculated.keys():
        options = [v for v in (cached.get(key), recalculated.get(key)) if v is not None]
        if len(options) == 2 and cell_equal(options[0], options[1]):
            options.pop()
        if len(options) == 2 and isinstance(options[0], Uncomputed):
            options.pop(0)  # the engine's value stands in for the missing cached one
        if options:
            cells[key] = tuple(options)
    return cells


def uncomputed_cells(formulas_ws, values_ws) -> set[tuple[int, int]]:
    """Formula cells of a sheet that were saved without a value (``data_only`` reads ``None``).

    Args:
        formulas_ws: The sheet as saved (openpyxl, formulas).
        values_ws: The same sheet read with ``data_only=True``.
    """
    formulas = {(c.row, c.column) for c in stored_cells(formulas_ws) if c.data_type == "f"}
    if not formulas:
        return set()
    valued = {(c.row, c.column) for c in stored_cells(values_ws) if c.value is not None}
    return formulas - valued


def mark_uncomputed(grid: Grid, cells: set[tuple[int, int]]) -> Grid:
    """``grid`` with each of ``cells`` set to :data:`UNCOMPUTED` (never left out as empty)."""
    return {**grid, **dict.fromkeys(cells, UNCOMPUTED)} if cells else grid


def enabled_value_sheets(check_board: dict[str, Any]) -> list[int]:
    """1-based sheet indexes whose check list enables ``cells.values``.

    Example:
        >>> enabled_value_sheets(
        ...     {"1": {"cells": {"values": True}}, "2": {"cells": {"values": False}}}
        ... )
        [1]
    """
    return sorted(
        int(k) for k, v in check_board.items() if (v or {}).get("cells", {}).get("values")
    )


def unsupported_checks(check_board: dict[str, Any]) -> list[str]:
    """Enabled checks other than ``cells.values`` (charts, pivots, ...), as
    ``sheet:category.property``.

    Example:
        >>> unsupported_checks({"1": {"cells": {"values": True}, "charts": {"title": True}}})
        ['1:charts.title']
    """
    out = []
    for sheet, categories in check_board.items():
        for category, props in (categories or {}).items():
            for prop, on in (props or {}).items():
                if on and (category, prop) != ("cells", "values"):
                    out.append(f"{sheet}:{category}.{prop}")
    return out


def compare_workbooks(
    result,
    ref_cached,
    ref_recalculated,
    check_board: dict[str, Any],
    *,
    result_formulas=None,
    ref_formulas=None,
) -> str | None:
    """Compare a result workbook with one reference; ``None`` if it matches, else the reason.

    Args:
        result: The agent's workbook (openpyxl, values).
        ref_cached: The reference as saved (openpyxl, ``data_only=True``).
        ref_recalculated: The reference recalculated by the same engine as the result,
            or ``None`` to accept cached values only.
        check_board: The reference's ``check_board`` (sheet index -> enabled checks).
        result_formulas: The agent's workbook with its formulas, when it was not
            recalculated: its formula cells without saved values are unknown, never empty.
        ref_formulas: The reference with its formulas, when ``ref_recalculated`` is
            ``None``: the same for its cells.
    """
    if len(result.worksheets) != len(ref_cached.worksheets):
        return f"the workbook has {len(result.worksheets)} worksheets, not the expected number"
    for index in enabled_value_sheets(check_board):
        if index > len(ref_cached.worksheets):
            continue
        ref_ws = ref_cached.worksheets[index - 1]
        cached = sheet_grid(ref_ws)
        recalculated = (
            sheet_grid(ref_recalculated.worksheets[index - 1]) if ref_recalculated else {}
        )
        if ref_recalculated is None and ref_formulas is not None:
            cached = mark_uncomputed(
                cached, uncomputed_cells(ref_formulas.worksheets[index - 1], ref_ws)
            )
        got_ws = result.worksheets[index - 1]
        got = sheet_grid(got_ws)
        if result_formulas is not None:
            got = mark_uncomputed(
                got, uncomputed_cells(result_formulas.worksheets[index - 1], got_ws)
            )
        reason = compare_sheet(_gold_cells(cached, recalculated), got)
        if reason is not None:
            return f"sheet {index}: {reason}"
    return None


__all__ = [
    "UNCOMPUTED",
    "Grid",
    "Uncomputed",
    "cell_equal",
    "compare_sheet",
    "compare_workbooks",
    "enabled_value_sheets",
    "mark_uncomputed",
    "normalize_value",
    "sheet_grid",
    "stored_cells",
    "table_extent",
    "uncomputed_cells",
    "unsupported_checks",
]
