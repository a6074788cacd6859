"""Broken upstream golds are found by checks, not by a hand-kept list.

Synthetic workbooks show what each check catches and what it lets through;
the shared SheetCopilot copy (skipped when absent) shows that exactly its two
known-wrong references are quarantined, and that for one of them the right
values really do score 0 against the reference.
"""

from __future__ import annotations

import io

import openpyxl
import pytest

from analyst_env.datasets import load_dataset
from analyst_env.datasets.gold_audit import (
    contradicting_labels,
    inconsistent_formulas,
    unsorted_approximate_lookups,
    workbook_reference_problems,
)
from analyst_env.verifiers import VerifyContext, judge
from analyst_env.verifiers.recalc import soffice_path


def _weeks_book(lookup: str):
    book = openpyxl.Workbook()
    data = book.active
    data.title = "Sheet1"
    data.append(["Week", "Sales"])
    for week in range(1, 11):
        data.append([f"Week {week}", 100 * week])
    out = book.create_sheet("Sheet2")
    out.append(["Week", "Sales"])
    for row in range(2, 12):
        out.append([f"Week {row - 1}", lookup.format(row=row)])
    return book


def test_an_approximate_lookup_over_unsorted_keys_is_found():
    book = _weeks_book("=VLOOKUP(A{row}, Sheet1!$A$1:$B$11, 2)")  # "Week 10" sorts before "Week 2"
    found = unsorted_approximate_lookups(book, book["Sheet2"])
    assert len(found) == 10 and found[0].startswith("Sheet2!B2 (VLOOKUP approximate match")
    assert unsorted_approximate_lookups(book, book["Sheet1"]) == []


@pytest.mark.parametrize(
    "formula",
    [
        "=VLOOKUP(A{row}, Sheet1!$A$1:$B$11, 2, FALSE)",
        "=VLOOKUP(A{row},Sheet1!$A$1:$B$11,2,0)",
        "=INDEX(Sheet1!$B$1:$B$11, MATCH(A{row}, Sheet1!$A$1:$A$11, 0))",
    ],
)
def test_exact_lookups_are_sound(formula):
    book = _weeks_book(formula)
    assert unsorted_approximate_lookups(book, book["Sheet2"]) == []
    assert inconsistent_formulas(book["Sheet2"]) == []


def test_an_approximate_lookup_over_sorted_keys_is_sound():
    book = openpyxl.Workbook()
    ws = book.active
    ws.append(["Bracket", "Rate"])
    for low, rate in [(0, 0.1), (1000, 0.2), (5000, 0.3)]:
        ws.append([low, rate])
    ws["D2"] = "=VLOOKUP(C2, A2:B4, 2)"  # the intended use: a sorted bracket table
    ws["D3"] = "=MATCH(C3, A2:A4)"
    assert unsorted_approximate_lookups(book, ws) == []


def test_one_formula_unlike_its_column_is_found():
    book = openpyxl.Workbook()
    ws = book.active
    for row, (city, col) in enumerate(
        [("Berkeley", 3), ("Denver", 3), ("Kansas City", 3), ("Chicago", 2)], 2
    ):
        ws.cell(row, 2, f'=VLOOKUP("{city}", Sheet1!$A$1:$E$71,{col},0)')
        ws.cell(row, 3, f"=B{row}*2")
    assert inconsistent_formulas(ws) == ["Sheet!B5 (differs from the 3 formulas around it)"]


def test_columns_that_vary_throughout_or_are_short_are_not_flagged():
    book = openpyxl.Workbook()
    ws = book.active
    for row, formula in enumerate(
        ["=SUM(A1:A9)", "=AVERAGE(A1:A9)", "=MAX(A1:A9)", "=MIN(A1:A9)"], 1
    ):
        ws.cell(row, 2, formula)  # a summary block: every formula different
    ws["D1"], ws["D2"] = "=A1+1", "=A2*3"  # two formulas are no run
    assert inconsistent_formulas(ws) == []


def test_labels_that_give_one_name_two_values_contradict_themselves():
    assert contradicting_labels([("n", "3"), ("m", "1"), ("n", "4"), ("m", "1.0")]) == [
        "n is both '3' and '4'"
    ]
    assert contradicting_labels([("n", "3"), ("n", "3.0"), ("k", "x")]) == []


def test_starter_references_are_sound(tmp_path):
    tasks = [t for t in load_dataset("starter").tasks if t.verifier.name == "workbook_match"]
    assert tasks
    for task in tasks:
        for ref in task.answer["references"]:
            assert workbook_reference_problems(ref["path"]) == [], task.id


def test_sheetcopilot_quarantines_exactly_its_two_wrong_references(shared):
    tasks = load_dataset(f"sheetcopilot:{shared('sheetcopilot')}").tasks
    wrong = {
        t.id: t.metadata["gold_status"]
        for t in tasks
        if t.metadata["gold_status"].startswith("reference")
    }
    assert set(wrong) == {"sheetcopilot-Tax-3", "sheetcopilot-EntireShippingCosts-13"}
    assert "VLOOKUP approximate match over unsorted" in wrong["sheetcopilot-Tax-3"]
    assert (
        "Sheet2!B5 (differs from the 3 formulas around it)"
        in wrong["sheetcopilot-EntireShippingCosts-13"]
    )


@pytest.mark.skipif(soffice_path() is None, reason="LibreOffice is not installed")
def test_the_right_values_score_0_against_the_quarantined_tax_reference(shared):
    task = {t.id: t for t in load_dataset(f"sheetcopilot:{shared('sheetcopilot')}").tasks}[
        "sheetcopilot-Tax-3"
    ]
    book = openpyxl.load_workbook(task.files["Tax.xlsx"])
    sales = {row[0]: row[1] for row in book["Sheet1"].iter_rows(min_row=2, values_only=True)}
    out = book.create_sheet("Sheet2")
    out.append(["Week", "Sales"])
    for week, value in sales.items():
        out.append([week, value])  # what the instruction asks for, matched exactly
    buf = io.BytesIO()
    book.save(buf)
    context = VerifyContext(task_files=dict(task.files), read_file=lambda name: buf.getvalue())
    assert judge(task.verifier, "done", task.answer, context).reward == 0.0
