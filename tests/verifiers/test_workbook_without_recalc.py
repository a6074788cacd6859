"""Workbook scoring where nothing recalculates: no cell is skipped, and such tasks are refused.

A formula cell saved without its value (openpyxl saves none; 837 of the shared
SheetCopilot reference cells have none) can only be checked after a recalculation.
Without LibreOffice it used to be left out of the check, so a workbook whose formulas
were all ``=1+1`` matched. Now it counts against the answer, with the reason, and a
server without LibreOffice refuses workbook tasks at reset instead of scoring them.
LibreOffice is made unavailable here the way an operator would: ``ANALYST_ENV_SOFFICE``
naming no executable (``soffice_path()`` is then None, whatever is on PATH).
"""

from __future__ import annotations

import io
from pathlib import Path

import openpyxl
import pytest

from analyst_env.datasets import load_dataset
from analyst_env.task_format import Task, VerifierSpec
from analyst_env.verifiers import VerifyContext, judge
from analyst_env.verifiers.recalc import (
    needs_recalculation,
    recalculation_refusal,
    soffice_path,
)

BOARD = {"1": {"cells": {"values": True}}}


@pytest.fixture
def no_soffice(monkeypatch, tmp_path):
    """LibreOffice unavailable: ``ANALYST_ENV_SOFFICE`` points at a file that is not there."""
    monkeypatch.setenv("ANALYST_ENV_SOFFICE", str(tmp_path / "no-soffice"))
    assert soffice_path() is None


def _save(rows: list[list]) -> bytes:
    wb = openpyxl.Workbook()
    for row in rows:
        wb.active.append(row)
    out = io.BytesIO()
    wb.save(out)
    return out.getvalue()


def _score(ref_path: Path, data: bytes, **params) -> tuple[float, str]:
    spec = VerifierSpec(name="workbook_match", params=params)
    gold = {
        "workbook": "w.xlsx",
        "references": [{"name": "gt1", "path": str(ref_path), "check_board": BOARD}],
    }
    verdict = judge(spec, "done", gold, VerifyContext(read_file=lambda name: data))
    return verdict.reward, verdict.detail


@pytest.fixture
def uncached_reference(tmp_path) -> Path:
    """A reference whose Total column is formulas saved without values (as openpyxl saves)."""
    path = tmp_path / "gt1.xlsx"
    path.write_bytes(_save([["a", "b", "Total"], [1, 2, "=A2+B2"], [3, 4, "=A3+B3"]]))
    return path


@pytest.mark.parametrize("params", [{"recalc": False}, {}])
def test_the_one_plus_one_attack_scores_0_without_recalculation(
    no_soffice, uncached_reference, params
):
    attack = _save([["a", "b", "Total"], [1, 2, "=1+1"], [3, 4, "=1+1"]])
    reward, detail = _score(uncached_reference, attack, **params)
    assert reward == 0.0
    assert "cannot be checked" in detail
    if params.get("recalc") is not False:  # it tried, and says why it could not
        assert detail.startswith("not recalculated (LibreOffice (soffice) is not installed")


def test_a_reference_cell_without_a_value_fails_even_the_right_values(
    no_soffice, uncached_reference
):
    right = _save([["a", "b", "Total"], [1, 2, 3], [3, 4, 7]])
    reward, detail = _score(uncached_reference, right)
    assert reward == 0.0
    assert "row 2, column 3 of the reference is a formula saved without its value" in detail


def test_an_agent_formula_without_a_value_never_passes(no_soffice, tmp_path):
    ref = tmp_path / "gt1.xlsx"
    ref.write_bytes(_save([["a", "b", "Total"], [1, 2, 3], [3, 4, 7]]))
    reward, detail = _score(ref, _save([["a", "b", "Total"], [1, 2, "=A2+B2"], [3, 4, 7]]))
    assert reward == 0.0
    assert "row 2, column 3: a formula without a computed value" in detail
    assert _score(ref, _save([["a", "b", "Total"], [1, 2, 3], [3, 4, 7]]))[0] == 1.0


@pytest.mark.skipif(soffice_path() is None, reason="LibreOffice is not installed")
def test_with_libreoffice_the_same_cells_are_checked_on_computed_values(uncached_reference):
    assert _score(uncached_reference, _save([["a", "b", "Total"], [1, 2, 3], [3, 4, 7]]))[0] == 1.0
    attack = _save([["a", "b", "Total"], [1, 2, "=1+1"], [3, 4, "=1+1"]])
    assert _score(uncached_reference, attack)[0] == 0.0


def _one_plus_one(path: str) -> tuple[bytes, int]:
    """The reference with every formula replaced by ``=1+1``, saved without values."""
    book = openpyxl.load_workbook(path)
    count = 0
    for ws in book.worksheets:
        for row in ws.iter_rows():
            for cell in row:
                if cell.data_type == "f":
                    cell.value, count = "=1+1", count + 1
    out = io.BytesIO()
    book.save(out)
    return out.getvalue(), count


def test_the_attack_scores_0_on_every_shared_sheetcopilot_task_without_libreoffice(
    shared, no_soffice
):
    tasks = load_dataset(f"sheetcopilot:{shared('sheetcopilot')}").tasks
    attacked = 0
    for task in tasks:
        data, count = _one_plus_one(task.answer["references"][0]["path"])
        if not count:
            continue
        attacked += 1
        context = VerifyContext(task_files=dict(task.files), read_file=lambda name, d=data: d)
        assert judge(task.verifier, "done", task.answer, context).reward == 0.0, task.id
    assert attacked > 0


def test_workbook_tasks_need_recalculation_and_are_refused_without_it(no_soffice, starter):
    workbook_tasks = [t for t in starter.tasks if t.verifier.name == "workbook_match"]
    assert workbook_tasks and all(needs_recalculation(t) for t in workbook_tasks)
    reason = recalculation_refusal(workbook_tasks[0])
    assert reason is not None and "LibreOffice (soffice) is not installed" in reason
    text = Task(
        id="n", instruction="?", answer=1, oracle_answer="1", verifier=VerifierSpec(name="numeric")
    )
    assert recalculation_refusal(text) is None


@pytest.fixture(scope="module")
def starter():
    return load_dataset("starter")
