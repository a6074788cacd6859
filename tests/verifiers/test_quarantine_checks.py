"""Checks that wrongly quarantined or flagged sound tasks: each wrong finding is a bug, tested.

- The formula audit took a count row the task asks for (SheetCopilot PeriodRate-4:
  ``=COUNTIF(C2:C25,TRUE)`` under 24 ``=IF(B..>=5,TRUE)``) for an inconsistent formula.
- ``validate``'s NaN adversarial answer flagged a DABench task whose gold really is NaN
  (dabench-554, held out of the shared copy: reproduced by shape).
"""

from __future__ import annotations

import openpyxl
import pytest

from analyst_env.datasets.gold_audit import inconsistent_formulas
from analyst_env.task_format import Task, VerifierSpec
from analyst_env.verifiers.adversarial import probe_task, probes_for


def _column(formulas: list[str], summary: str | None, sheet_ref: str = "") -> list[str]:
    book = openpyxl.Workbook()
    ws = book.active
    for row, formula in enumerate(formulas, start=2):
        ws.cell(row, 3, formula.format(i=row))
    if summary is not None:
        ws.cell(len(formulas) + 2, 3, summary.format(last=len(formulas) + 1, ref=sheet_ref))
    book.create_sheet("Other")
    return inconsistent_formulas(ws)


@pytest.mark.parametrize(
    "summary",
    ["=COUNTIF({ref}C2:C{last},TRUE)", "=SUM(C2:C{last})", "=AVERAGE($C$2:$C${last})"],
)
def test_a_summary_row_under_its_column_is_not_inconsistent(summary):
    assert _column(["=IF(B{i}>=5,TRUE)"] * 5, summary) == []


@pytest.mark.parametrize(
    "odd",
    [
        "=IF(B{last}>=6,TRUE)*2",  # a slip, not a range
        "=COUNTIF(Other!C2:C{last},TRUE)",  # a range of another sheet
        "=COUNTIF(C2:C3,TRUE)",  # covers only part of the column above
        "=SUM(D2:D{last})",  # another column
    ],
)
def test_an_odd_last_row_that_does_not_summarize_its_column_is_still_found(odd):
    assert _column(["=IF(B{i}>=5,TRUE)"] * 5, odd) == [
        "Sheet!C7 (differs from the 5 formulas around it)"
    ]


def _dabench(parts: list[list[str]]) -> Task:
    oracle = " ".join(f"@{name}[{value}]" for name, value in parts)
    return Task(
        id="dabench-nan",
        instruction="?",
        answer=parts,
        oracle_answer=oracle,
        verifier=VerifierSpec(name="dabench"),
    )


def test_a_gold_that_really_is_nan_is_not_flagged_by_the_nan_answer():
    result = probe_task(_dabench([["mean_value", "nan"]]))
    assert result.adversarial_nonzero == [] and result.natural_failed == []


def test_the_nan_answer_is_still_tried_where_a_part_is_a_number():
    task = _dabench([["mean_value", "nan"], ["count", "12"]])
    adversarial, _ = probes_for(task)
    (nan,) = [p for p in adversarial if p.label == "nan"]
    assert nan.answer == "@mean_value[nan] @count[nan]"
    result = probe_task(task)
    assert result.adversarial_nonzero == []
