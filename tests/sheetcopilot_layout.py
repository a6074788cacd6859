"""Synthetic SheetCopilot folders shaped like two held-out tasks (the real files stay upstream).

- ``FutureValue-4``: its first reference is the input workbook unchanged (only the second
  adds the asked-for Future Value column), so the untouched workbook scores 1.
- ``PeriodRate-4``: both references add a "High Periods" column of formulas and, as
  the instruction asks, a COUNTIF row underneath, the odd formula of its column.

The workbooks are written here with openpyxl (no cached formula values, as openpyxl
saves them), in the layout ``load_sheetcopilot`` reads.
"""

from __future__ import annotations

import json
from pathlib import Path

import openpyxl
import yaml

BOARD = {"check_board": {"1": {"cells": {"values": True}, "charts": {"title": False}}}}

FUTURE_INPUT = [
    ["No.", "Present Value", "Years", "Annual Interest Rate", "# Compound Periods"],
    [1, 3150, 6, 0.18, 1],
    [2, 8453, 19, 0.06, 1],
    [3, 89305, 13, 0.11, 1],
]
RATES_INPUT = [["Annual Rate (%)", "Period per year"]] + [
    [rate, periods] for rate, periods in [(11.25, 2), (7.776, 6), (15.5, 6), (9.32, 2), (18.5, 8)]
]


def _book(path: Path, rows: list[list]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    wb = openpyxl.Workbook()
    for row in rows:
        wb.active.append(row)
    wb.save(path)


def _task(root: Path, sheet: str, no: int, instruction: str, inputs, references) -> dict:
    _book(root / "task_sheets" / f"{sheet}.xlsx", inputs)
    folder = root / "task_sheet_answers_v2" / sheet / f"{no}_{sheet}"
    for k, rows in enumerate(references, start=1):
        _book(folder / f"{no}_{sheet}_gt{k}.xlsx", rows)
        (folder / f"{no}_{sheet}_gt{k}_check.yaml").write_text(yaml.safe_dump(BOARD))
    return {"Sheet Name": sheet, "No.": no, "Context": "", "Instructions": instruction}


def future_value_references() -> list[list[list]]:
    header = [*FUTURE_INPUT[0], "Future Value"]
    rows = [[*r, f"=B{i}*(1+D{i}/E{i})^(C{i}*E{i})"] for i, r in enumerate(FUTURE_INPUT[1:], 2)]
    return [FUTURE_INPUT, [header, *rows]]


def period_rate_references() -> list[list[list]]:
    last = len(RATES_INPUT)
    refs = []
    for title, formula in [("High Period", "=IF(B{i}>=5,TRUE)"), ("High Periods", "=B{i}>=5")]:
        rows = [[*RATES_INPUT[0], title]]
        rows += [[*r, formula.format(i=i)] for i, r in enumerate(RATES_INPUT[1:], 2)]
        rows.append([None, None, f"=COUNTIF(C2:C{last},TRUE)"])
        refs.append(rows)
    return refs


def write_heldout_shapes(root: Path) -> Path:
    """A SheetCopilot folder with the two tasks; returns ``root``."""
    rows = [
        _task(
            root,
            "FutureValue",
            4,
            "Calculate the Future Value column right after column E.",
            FUTURE_INPUT,
            future_value_references(),
        ),
        _task(
            root,
            "PeriodRate",
            4,
            'In a new column titled "High Periods", mark the rows whose "Period per year" is no '
            "less than 5 with True and count them in an underneath row.",
            RATES_INPUT,
            period_rate_references(),
        ),
    ]
    (root / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root
