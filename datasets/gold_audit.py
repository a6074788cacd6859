"""Find broken upstream golds without listing them by hand.

A benchmark's reference answer can be wrong, and then a correct answer scores
0 and training pushes the policy towards the mistake. Loaders run these checks
and record what they find in ``metadata["gold_status"]`` (``"ok"`` or the
evidence); :mod:`~analyst_env.datasets.quarantine` adds, at load, the check that
needs the task's files (a task its untouched initial state already solves), and
that one decision is what serving, ``eval``, exports, ``/web`` and ``validate``
read. Nothing is dropped: see ``docs/rewards.md`` for how quarantined tasks are
served.

Checks on reference **workbooks** (SheetCopilot), read from the formulas the
reference itself was built with:

- **approximate lookup over unsorted keys**: ``VLOOKUP``/``HLOOKUP`` without
  ``FALSE``/``0`` as the last argument (and ``MATCH`` without ``0``) assume the
  lookup column is sorted ascending; on unsorted keys (``Week 1`` ...
  ``Week 10``, where ``Week 10`` sorts before ``Week 2``) Excel and LibreOffice
  return values from the wrong rows, so the reference holds wrong values;
- **inconsistent formula**: in a column of at least three formulas that agree
  once literals are set aside, one formula that differs from all the others
  (a copy-paste slip such as a lookup of the wrong column), the rule behind
  Excel's own "inconsistent formula" warning. A **summary row** is not such a
  slip: the odd formula at the top or bottom of the run that aggregates the
  run's own cells (``=COUNTIF(C2:C25,TRUE)`` under ``C2:C25``, a total, a mean),
  as SheetCopilot PeriodRate-4 asks for ("count them in an underneath row").

Check on **labels** (DABench, and any loader whose gold is ``name -> value``
pairs): a name given two different values contradicts itself; no answer can
state both.

Example:
    >>> contradicting_labels([("n", "3"), ("m", "1"), ("n", "4"), ("m", "1.0")])
    ["n is both '3' and '4'"]
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import openpyxl
from openpyxl.utils.cell import column_index_from_string, range_boundaries

from analyst_env.task_format import GOLD_OK  # re-exported: loaders set it

_STRING = re.compile(r'"(?:[^"]|"")*"')
_LOOKUP = re.compile(r"\b(VLOOKUP|HLOOKUP|MATCH)\s*\(", re.I)
_REF = re.compile(
    r"(?:(?P<sheet>'[^']+'|[A-Za-z_][\w.]*)!)?(?P<range>\$?[A-Z]{1,3}\$?\d+(?::\$?[A-Z]{1,3}\$?\d+)?)"
)
_CELL = re.compile(r"(\$?)([A-Z]{1,3})(\$?)(\d+)")


def _same_value(a: Any, b: Any) -> bool:
    try:
        return a == b or abs(float(a) - float(b)) < 1e-6
    except (TypeError, ValueError):
        return str(a).strip() == str(b).strip()


def contradicting_labels(pairs: Iterable[Sequence[Any]]) -> list[str]:
    """Names the gold gives different values (no answer can state both: such a gold is broken)."""
    seen: dict[str, Any] = {}
    found = []
    for name, value in pairs:
        key = str(name)
        if key in seen and not _same_value(seen[key], value):
            found.append(f"{key} is both {seen[key]!r} and {value!r}")
        seen.setdefault(key, value)
    return found


# ── formulas ──
def _arguments(formula: str, start: int) -> list[str]:
    """The top-level arguments of the call whose ``(`` is at ``start``."""
    depth, args = 0, []
    current: list[str] = []
    for char in formula[start:]:
        if char == "(":
            depth += 1
            if depth == 1:
                continue
        elif char == ")":
            depth -= 1
            if depth == 0:
                args.append("".join(current).strip())
                return args
        elif char == "," and depth == 1:
            args.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    return args


def _approximate(name: str, args: list[str]) -> bool:
    mode_at = 2 if name == "MATCH" else 3
    if len(args) <= mode_at:
        return True
    return args[mode_at].strip().upper() in ("TRUE", "1")


def _excel_key(value: Any) -> tuple:
    """Excel's ascending order for lookups: numbers, then text (case-insensitive), then booleans."""
    if isinstance(value, bool):
        return (2, value)
    if isinstance(value, (int, float)):
        return (0, value)
    return (1, str(value).casefold())


def _lookup_keys(book, sheet_name: str, text: str, function: str) -> list[Any] | None:
    """The values an approximate lookup searches: the range's first column (or row, HLOOKUP)."""
    match = _REF.fullmatch(text.strip())
    if not match:
        return None
    title = (match.group("sheet") or sheet_name).strip("'")
    if title not in book.sheetnames:
        return None
    min_col, min_row, max_col, max_row = range_boundaries(match.group("range").replace("$", ""))
    ws = book[title]
    if function == "HLOOKUP" or (function == "MATCH" and min_row == max_row):
        cells = [ws.cell(min_row, c).value for c in range(min_col, max_col + 1)]
    else:
        cells = [ws.cell(r, min_col).value for r in range(min_row, max_row + 1)]
    return [v for v in cells if v is not None]


def unsorted_approximate_lookups(book, ws) -> list[str]:
    """Cells of ``ws`` whose approximate-match lookup searches keys that are not sorted."""
    found = []
    for row in ws.iter_rows():
        for cell in row:
            formula = cell.value
            if not (isinstance(formula, str) and formula.startswith("=")):
                continue
            for call in _LOOKUP.finditer(formula):
                name = call.group(1).upper()
                args = _arguments(formula, call.end() - 1)
                if len(args) < 2 or not _approximate(name, args):
                    continue
                keys = _lookup_keys(book, ws.title, args[1], name)
                if keys and [_excel_key(k) for k in keys] != sorted(_excel_key(k) for k in keys):
                    found.append(
                        f"{ws.title}!{cell.coordinate} ({name} approximate match over unsorted "
                        f"{args[1]})"
                    )
                    break
    return found


def _template(formula: str, row: int, column: int) -> str:
    """The formula with string literals set aside and relative references as offsets (R1C1)."""

    def relative(m: re.Match[str]) -> str:
        col_abs, col, row_abs, r = m.groups()
        c = (
            f"C{column_index_from_string(col)}"
            if col_abs
            else f"C[{column_index_from_string(col) - column}]"
        )
        rr = f"R{r}" if row_abs else f"R[{int(r) - row}]"
        return rr + c

    return _CELL.sub(relative, _STRING.sub('"…"', formula))


def is_summary_row(ws, run: list[tuple[int, str]], row: int, column: int) -> bool:
    """Whether the odd formula at ``row`` closes or opens the run by aggregating it: it is the
    run's first or last cell and refers to a range of its own sheet and column that spans
    every other row of the run (a count, total or mean row, not a copy-paste slip).

    Example:
        >>> book = openpyxl.Workbook()
        >>> ws = book.active
        >>> for r in range(2, 6):
        ...     ws[f"C{r}"] = f"=B{r}>=5"
        >>> ws["C6"] = "=COUNTIF(C2:C5,TRUE)"
        >>> run = [(r, "") for r in range(2, 7)]
        >>> is_summary_row(ws, run, 6, 3), is_summary_row(ws, run, 4, 3)
        (True, False)
    """
    first, last = run[0][0], run[-1][0]
    if row not in (first, last):
        return False
    others = (first + 1, last) if row == first else (first, last - 1)
    formula = ws.cell(row, column).value
    for ref in _REF.finditer(_STRING.sub('"…"', str(formula))):
        sheet = (ref.group("sheet") or ws.title).strip("'")
        if sheet != ws.title or ":" not in ref.group("range"):
            continue
        min_col, min_row, max_col, max_row = range_boundaries(ref.group("range").replace("$", ""))
        if min_col <= column <= max_col and min_row <= others[0] and max_row >= others[1]:
            return True
    return False


def inconsistent_formulas(ws, min_run: int = 3) -> list[str]:
    """Cells whose formula differs from every other formula of its column's run, which all agree."""
    found = []
    columns: dict[int, list[tuple[int, str]]] = {}
    for row in ws.iter_rows():
        for cell in row:
            if isinstance(cell.value, str) and cell.value.startswith("="):
                columns.setdefault(cell.column, []).append(
                    (cell.row, _template(cell.value, cell.row, cell.column))
                )
    for column, cells in columns.items():
        runs, run = [], [cells[0]]
        for previous, current in zip(cells, cells[1:]):
            if current[0] == previous[0] + 1:
                run.append(current)
            else:
                runs.append(run)
                run = [current]
        runs.append(run)
        for run in runs:
            if len(run) < min_run:
                continue
            counts = Counter(template for _, template in run)
            if len(counts) == 2 and min(counts.values()) == 1:
                odd = min(counts, key=counts.__getitem__)
                row_number = next(r for r, t in run if t == odd)
                if is_summary_row(ws, run, row_number, column):
                    continue
                cell = ws.cell(row_number, column).coordinate
                found.append(
                    f"{ws.title}!{cell} (differs from the {len(run) - 1} formulas around it)"
                )
    return found


def workbook_reference_problems(path: str | Path) -> list[str]:
    """What is wrong with a reference workbook's own formulas (empty list: nothing found)."""
    book = openpyxl.load_workbook(path)
    problems = []
    for ws in book.worksheets:
        problems += unsorted_approximate_lookups(book, ws)
        problems += inconsistent_formulas(ws)
    return problems


__all__ = [
    "GOLD_OK",
    "contradicting_labels",
    "inconsistent_formulas",
    "is_summary_row",
    "unsorted_approximate_lookups",
    "workbook_reference_problems",
]
