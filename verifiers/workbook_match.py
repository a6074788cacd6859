"""SheetCopilot's ``cells.values`` check: does the agent's workbook match a reference workbook?

Upstream (``agent/utils/compare_sheets.py``) opens the result and each accepted
reference in Excel and, for every sheet its check list enables, compares the
table that starts at A1 column by column: the table's extent is
``min(A1.End(xlDown), UsedRange.Rows)`` rows by ``min(A1.End(xlToRight),
UsedRange.Columns)`` columns and must be the same in both; each reference column
is paired with the first unused result column that has the same header; cells
must have the same type, strings equal after ``strip()``, numbers
``np.allclose(atol=1e-8)``, anything else equal. Over 200 rows, every 100th row
is checked. The worksheet counts must match. Any matching reference solves the task.

Here Excel is replaced by openpyxl plus a real formula engine: the result and
every reference are recalculated with LibreOffice (:mod:`~analyst_env.verifiers.recalc`)
in one call, and a reference cell accepts either its cached value (what Excel
computed when the reference was made) or LibreOffice's value for the same
formula. So a correct formula is not failed for an engine difference (the last
digit of a float turned into text, locale-dependent ``DATEVALUE``), and a
reference saved without cached values is still usable. Numbers compare as
floats (Excel COM returns every number as a float); ``UsedRange`` is the
bounding box of non-empty cells (openpyxl cannot see formatting-only cells the
way Excel does).

Without a recalculation (LibreOffice absent or failed, or ``recalc=False``) no cell
is skipped: a formula cell saved without its value, in a reference or in the
agent's workbook, holds :data:`UNCOMPUTED`, which equals nothing, so the check
fails there with the reason (before, such a reference cell was left unchecked,
and a workbook whose formulas were all ``=1+1`` matched references saved without
cached values).

Example:
    >>> grid = {(1, 1): "Week", (2, 1): "Week 1", (1, 2): "Sales", (2, 2): 5.0}
    >>> table_extent(grid)
    (2, 2)
    >>> cell_equal(5.0, 5.000000001), cell_equal(" a ", "a"), cell_equal(5.0, "5")
    (True, True, False)
"""

from __future__ import annotations

import io
import tempfile
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import openpyxl

from analyst_env.verifiers.recalc import RecalcError, has_formulas, recalculate_files
from analyst_env.verifiers.scorers import register
from analyst_env.verifiers.verdict import Verdict, VerifyContext

TOLERANCE = 1e-8
MAX_ROW, MAX_COL = 1_048_576, 16_384
MAX_UNPACKED_BYTES = 25_000_000
"""A workbook whose parts unpack to more than this is not opened (openpyxl would spend
tens of seconds and most of a gigabyte on a 200,000-row sheet; a zip bomb much more)."""

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


def sheet_grid(ws) -> Grid:
    """The non-empty cells of an openpyxl worksheet, values normalized."""
    grid: Grid = {}
    for row in ws.iter_rows():
        for cell in row:
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
    formulas = {
        (c.row, c.column) for row in formulas_ws.iter_rows() for c in row if c.data_type == "f"
    }
    if not formulas:
        return set()
    valued = {
        (c.row, c.column) for row in values_ws.iter_rows() for c in row if c.value is not None
    }
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


def _load_values(data: bytes):
    return openpyxl.load_workbook(io.BytesIO(data), data_only=True)


@register("workbook_match")
def workbook_match(
    submitted: str,
    gold: Any,
    *,
    context: VerifyContext,
    recalc: bool = True,
    timeout_s: float = 90.0,
    max_unpacked_bytes: int = MAX_UNPACKED_BYTES,
) -> Verdict:
    """1.0 iff the saved workbook matches any reference on every ``cells.values`` sheet.

    The answer text is ignored; the workbook is read from the episode. The
    verdict's detail reaches the final observation, so it locates the first
    mismatch in the agent's own workbook without quoting any reference value.

    Args:
        submitted: The final answer (ignored).
        gold: ``{"workbook": name in the working directory, "references":
            [{"name", "path" (host xlsx), "check_board"}]}``.
        context: Gives ``read_file`` for the episode's files.
        recalc: Recalculate result and references with LibreOffice first (skipped when none
            of them holds a formula: the saved values are then all there is).
        timeout_s: LibreOffice time limit.
        max_unpacked_bytes: A workbook unpacking to more than this scores 0 unopened.

    Returns:
        The verdict, with one component per reference.
    """
    name = gold["workbook"]
    refs = gold["references"]
    if context.read_file is None:
        return Verdict(0.0, detail="no episode files to read")
    try:
        data = context.read_file(name)
    except FileNotFoundError:
        return Verdict(0.0, detail=f"{name} not found in the working directory")
    if not zipfile.is_zipfile(io.BytesIO(data)):
        return Verdict(0.0, detail=f"{name} is not an xlsx workbook")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as package:
            unpacked = sum(info.file_size for info in package.infolist())
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        return Verdict(0.0, detail=f"{name} is not an xlsx workbook: {exc}")
    if unpacked > max_unpacked_bytes:
        return Verdict(
            0.0,
            detail=f"{name} unpacks to {unpacked} bytes, over the limit of {max_unpacked_bytes}; "
            "not opened",
        )
    try:
        _load_values(data)
    except Exception as exc:  # openpyxl raises many types on a corrupt package
        return Verdict(0.0, detail=f"{name} cannot be opened: {type(exc).__name__}: {exc}")
    detail_prefix = ""
    recalculated: Sequence[bytes | None] = [None] * (len(refs) + 1)
    blobs = [data, *(Path(r["path"]).read_bytes() for r in refs)] if recalc else []
    if any(has_formulas(blob) for blob in blobs):  # values only: nothing to recalculate
        try:
            recalculated = _recalculate(blobs, timeout_s)
        except RecalcError as exc:
            detail_prefix = f"not recalculated ({exc}); "
    result = _load_values(recalculated[0] or data)
    result_formulas = None
    if recalculated[0] is None and has_formulas(data):  # its formulas may lack values
        result_formulas = openpyxl.load_workbook(io.BytesIO(data))
    components, reasons = {}, []
    for number, (ref, ref_recalc) in enumerate(zip(refs, recalculated[1:]), start=1):
        ref_data = Path(ref["path"]).read_bytes()
        cached = _load_values(ref_data)
        again = _load_values(ref_recalc) if ref_recalc else None
        formulas = None
        if again is None and has_formulas(ref_data):  # its formulas may lack cached values
            formulas = openpyxl.load_workbook(io.BytesIO(ref_data))
        reason = compare_workbooks(
            result,
            cached,
            again,
            ref.get("check_board", {}),
            result_formulas=result_formulas,
            ref_formulas=formulas,
        )
        components[f"reference {number}"] = float(reason is None)  # numbered: file names are gold
        reasons.append(f"reference {number}: {reason or 'match'}")
    reward = max(components.values(), default=0.0)
    return Verdict(reward, components, detail_prefix + "; ".join(reasons))


def _recalculate(blobs: list[bytes], timeout_s: float) -> list[bytes]:
    with tempfile.TemporaryDirectory(prefix="analyst-wbmatch-") as tmp:
        paths = []
        for i, blob in enumerate(blobs):
            path = Path(tmp) / f"book{i}.xlsx"
            path.write_bytes(blob)
            paths.append(path)
        outs = recalculate_files(paths, Path(tmp) / "out", timeout_s=timeout_s)
        return [p.read_bytes() for p in outs]


__all__ = [
    "UNCOMPUTED",
    "cell_equal",
    "compare_sheet",
    "compare_workbooks",
    "enabled_value_sheets",
    "table_extent",
    "uncomputed_cells",
    "unsupported_checks",
    "workbook_match",
]
