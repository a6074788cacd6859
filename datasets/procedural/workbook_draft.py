"""Result-workbook drafts: the agent writes ``result.xlsx``, scored by ``workbook_match``.

A workbook template (``books``) describes a :class:`WorkbookDraft`: the sheets the agent
must write, each a pandas frame computed from the input files plus a plain-words
definition of every column and of the row order. The request, the sheet sections and the
rules of the instruction are built from those definitions (:func:`workbook_request`,
:func:`sheet_sections`, :func:`rules`), and the oracle cell from the same frames
(:func:`oracle_code`), so what is asked for and what is checked come from one place.

``workbook_match`` compares cell types strictly (a number is not its text) and
numbers with ``np.allclose`` (``atol=1e-8``, ``rtol=1e-5``), so a draft is
dropped when its rounding is ambiguous (an unrounded value sitting on a
half-unit, where two correct programs may round differently, and the two
roundings are further apart than the scorer tolerates), when a sheet is
empty or over 200 rows (the scorer samples longer tables), or when a cell is
missing (an empty first-column cell would cut the table short).

Example:
    >>> import pandas as pd
    >>> sheet = Sheet(
    ...     "Summary",
    ...     "One row per region.",
    ...     pd.DataFrame({"region": ["E", "W"], "total": [1.234, 5.0]}),
    ...     [Column("region", "the region"), Column("total", "total revenue", 2)],
    ...     "sorted by region A to Z",
    ... )
    >>> finish(WorkbookDraft("easy", [sheet])).sheets[0].frame.total.tolist()
    [1.23, 5.0]
    >>> ambiguous_rounding([0.125], 2)
    True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

RESULT = "result.xlsx"
"""The workbook every result-workbook task asks for."""

MAX_ROWS = 200
"""Longest table ``workbook_match`` checks row by row (it samples every 100th row beyond)."""

_HALF_UNIT_SLACK = 1e-6
_ATOL, _RTOL = 1e-8, 1e-5  # workbook_match: np.allclose(gold, got, atol=1e-8), numpy's default rtol


@dataclass
class Column:
    """One column of a result sheet: its header, what it holds, and its rounding (``None``: as
    is)."""

    name: str
    meaning: str
    decimals: int | None = None

    def sentence(self) -> str:
        rounding = "" if self.decimals is None else f", rounded to {self.decimals} decimal places"
        return f"- `{self.name}`: {self.meaning}{rounding}"


@dataclass
class Sheet:
    """One sheet the agent must write: name, content, columns (in order) and row order."""

    name: str
    what: str
    frame: pd.DataFrame
    columns: list[Column]
    order: str


@dataclass
class WorkbookDraft:
    """A generated result-workbook task before it becomes a ``Task``.

    Attributes:
        level: ``easy``, ``medium`` or ``hard``.
        sheets: The sheets, in the order the workbook must have them.
        params: The template's parameters (public; they are in the instruction anyway).
    """

    level: str
    sheets: list[Sheet]
    params: dict[str, Any] = field(default_factory=dict)


def ambiguous_rounding(values: Any, decimals: int) -> bool:
    """Whether a value lies (nearly) on a half-unit of the last asked-for place and its two
    roundings differ
    by more than the scorer tolerates.

    Example:
        >>> (
        ...     ambiguous_rounding([1.004, 2.0], 2),
        ...     ambiguous_rounding([1.005], 2),
        ...     ambiguous_rounding([1234.565], 2),
        ... )
        (False, True, False)
    """
    unit = 10.0**-decimals
    for v in values:
        scaled = abs(float(v)) / unit
        on_half = abs(scaled - math.floor(scaled) - 0.5) < _HALF_UNIT_SLACK
        if on_half and unit > _ATOL + _RTOL * (abs(float(v)) - unit):
            return True
    return False


def finish(draft: WorkbookDraft) -> WorkbookDraft | None:
    """Select and round each sheet's columns as declared; ``None`` if the draft cannot be scored
    fairly."""
    sheets = []
    for sheet in draft.sheets:
        frame = sheet.frame.reset_index(drop=True)
        missing = [c.name for c in sheet.columns if c.name not in frame.columns]
        if missing:
            raise ValueError(
                f"sheet {sheet.name!r} declares columns it does not compute: {missing}"
            )
        frame = frame[[c.name for c in sheet.columns]].copy()
        if frame.empty or len(frame) > MAX_ROWS or frame.isna().any().any():
            return None
        for c in sheet.columns:
            if c.decimals is not None:
                if ambiguous_rounding(frame[c.name], c.decimals):
                    return None
                frame[c.name] = frame[c.name].astype(float).round(c.decimals)
        sheets.append(replace(sheet, frame=frame))
    return replace(draft, sheets=sheets)


def workbook_request(draft: WorkbookDraft) -> str:
    """The sentence asking for ``result.xlsx`` and naming its sheets in order."""
    names = ", ".join(f"`{s.name}`" for s in draft.sheets)
    count = (
        "one sheet"
        if len(draft.sheets) == 1
        else f"exactly {len(draft.sheets)} sheets, in this order:"
    )
    return f"Create an Excel workbook `{RESULT}` in your working directory with {count} {names}."


def sheet_sections(draft: WorkbookDraft) -> list[str]:
    """One paragraph per sheet: what a row is, the columns in order, the row order."""
    return [
        f"Sheet `{sheet.name}`: {sheet.what}\nColumns, in this order:\n"
        + "\n".join(c.sentence() for c in sheet.columns)
        + f"\nRows: {sheet.order}."
        for sheet in draft.sheets
    ]


def rules(workbook: str = RESULT, in_place: bool = False) -> str:
    """How every sheet is laid out and checked; ``in_place``: the sheets are added to an input."""
    where, others = (
        ("On the new sheet", " The workbook's other sheets and their cells stay as they are.")
        if in_place
        else ("On every sheet", "")
    )
    return (
        f"{where}: the header row (the column names above, exactly) is row 1 "
        "starting at cell A1, one record "
        "per row below it, no index column, no blank or total rows"
        + ("" if in_place else ", no other sheets")
        + f".{others} Write "
        "numbers as numbers and "
        "text as text; dates as text in YYYY-MM-DD form. " + checked_then_submit(workbook)
    )


def checked_then_submit(workbook: str) -> str:
    """The instruction's last sentences: how the saved workbook is checked, then submit."""
    return (
        "Formulas are fine (the workbook is recalculated before it is checked); only cell "
        f"values are checked. When `{workbook}` is saved, call final_answer (the text is not "
        "scored)."
    )


def _rows(frame: pd.DataFrame) -> list[list[Any]]:
    header = [str(c) for c in frame.columns]
    body = [
        [v.item() if hasattr(v, "item") else v for v in row]
        for row in frame.itertuples(index=False, name=None)
    ]
    return [header, *body]


def oracle_code(draft: WorkbookDraft) -> str:
    """Python for the agent's kernel that writes the reference cells into ``result.xlsx``.

    Example:
        >>> sheet = Sheet("S", "x", pd.DataFrame({"a": [1]}), [Column("a", "a")], "one row")
        >>> "wb.save('result.xlsx')" in oracle_code(WorkbookDraft("easy", [sheet]))
        True
    """
    sheets = {s.name: _rows(s.frame) for s in draft.sheets}
    return "\n".join(
        [
            "import openpyxl",
            f"SHEETS = {sheets!r}",
            "wb = openpyxl.Workbook()",
            "wb.remove(wb.active)",
            "for name, rows in SHEETS.items():",
            "    ws = wb.create_sheet(name)",
            "    for row in rows:",
            "        ws.append(row)",
            f"wb.save({RESULT!r})",
            "print('saved', len(SHEETS), 'sheets')",
        ]
    )


def check_board(draft: WorkbookDraft) -> dict[str, Any]:
    """``workbook_match``'s check list: cell values on every sheet."""
    return {str(i): {"cells": {"values": True}} for i in range(1, len(draft.sheets) + 1)}


def leaks(draft: WorkbookDraft, text: str) -> bool:
    """Whether ``text`` spells out a rounded, non-integral reference number (as the answer would be
    written).

    Whole integers (counts, ids, years) are not checked: a year in the question
    may well equal a count by chance without telling anything.

    Example:
        >>> sheet = Sheet("S", "x", pd.DataFrame({"v": [12.5]}), [Column("v", "v", 2)], "one row")
        >>> draft = WorkbookDraft("easy", [sheet])
        >>> leaks(draft, "Totals above 12.5"), leaks(draft, "x")
        (True, False)
    """
    import re

    for sheet in draft.sheets:
        for c in sheet.columns:
            if c.decimals is None or c.decimals == 0:
                continue
            for v in sheet.frame[c.name]:
                if float(v).is_integer():
                    continue
                for form in {repr(float(v)), f"{float(v):.{c.decimals}f}"}:
                    if re.search(rf"(?<![\d.]){re.escape(form)}(?!\d)", text):
                        return True
    return False


__all__ = [
    "Column",
    "RESULT",
    "Sheet",
    "WorkbookDraft",
    "checked_then_submit",
    "finish",
    "leaks",
    "oracle_code",
    "rules",
    "sheet_sections",
    "workbook_request",
]
