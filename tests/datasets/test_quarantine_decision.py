"""The one quarantine decision, made at load: gold checks, then "solved by its initial state".

``load_dataset`` quarantines an upstream task whose untouched initial state already
scores (for every file kind), and its formula audit knows summary rows. Held-out
SheetCopilot tasks are reproduced by shape (``sheetcopilot_layout``); the shared
copies, where present, must come out with no task served that doing nothing solves.
"""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import openpyxl
import pytest
from sheetcopilot_layout import write_heldout_shapes

from analyst_env.datasets import load_dataset
from analyst_env.datasets.quarantine import (
    SOLVED_BY_INITIAL_STATE,
    audit_initial_state,
    initial_state_finding,
)
from analyst_env.task_format import Task, VerifierSpec
from analyst_env.verifiers import VerifyContext, judge
from analyst_env.verifiers.recalc import recalculate_bytes, soffice_path


def shared_datasets() -> Path:
    """``$ANALYST_ENV_SHARED_DATASETS`` or ``../shared/datasets`` next to the repo root."""
    env = os.environ.get("ANALYST_ENV_SHARED_DATASETS")
    return Path(env) if env else Path(__file__).resolve().parents[2] / ".." / "shared" / "datasets"


@pytest.fixture(scope="module")
def heldout(tmp_path_factory):
    root = write_heldout_shapes(tmp_path_factory.mktemp("sheetcopilot"))
    return load_dataset(f"sheetcopilot:{root}").by_id()


def test_a_task_whose_reference_is_its_input_is_quarantined_at_load(heldout):
    reason = heldout["sheetcopilot-FutureValue-4"].quarantine_reason
    assert reason is not None
    assert reason.startswith(f"{SOLVED_BY_INITIAL_STATE}: reference 1 is the input workbook")


def test_a_count_row_the_task_asks_for_is_not_an_inconsistent_formula(heldout):
    task = heldout["sheetcopilot-PeriodRate-4"]
    assert task.quarantine_reason is None
    assert task.metadata["gold_notes"] == [
        "first reference has 6 formula cells without cached values (scored on recalculation)"
    ]


@pytest.mark.skipif(soffice_path() is None, reason="LibreOffice is not installed")
def test_the_period_rate_oracle_scores_1_and_doing_nothing_0(heldout, tmp_path, monkeypatch):
    task = heldout["sheetcopilot-PeriodRate-4"]
    name = task.answer["workbook"]
    shutil.copy(task.files[name], tmp_path / name)
    monkeypatch.chdir(tmp_path)
    exec(task.oracle_steps[0].arguments["code"], {})  # the oracle's own cell, run in place
    solved = (tmp_path / name).read_bytes()
    untouched = open(task.files[name], "rb").read()
    for data, want in ((solved, 1.0), (untouched, 0.0)):
        context = VerifyContext(task_files=dict(task.files), read_file=lambda n, d=data: d)
        assert judge(task.verifier, "done", task.answer, context).reward == want


def test_an_output_file_already_among_the_inputs_is_quarantined(tmp_path):
    """Another file kind: a DA-Code-style CSV answer that the task's own files already hold."""
    gold = tmp_path / "gold.csv"
    gold.write_text("city,total\nOslo,3\nRome,5\n")
    shutil.copy(gold, tmp_path / "result.csv")
    task = Task(
        id="csv-solved",
        instruction="Write result.csv.",
        files={"result.csv": str(tmp_path / "result.csv")},
        answer={"outputs": [{"file": "result.csv", "gold": [str(gold)]}]},
        oracle_answer="done",
        verifier=VerifierSpec(name="dacode_csv"),
        metadata={"gold_status": "ok"},
    )
    unsolved = task.model_copy(
        update={"id": "csv-open", "files": {}, "metadata": {"gold_status": "ok"}}
    )
    audit_initial_state([task, unsolved])
    assert str(task.quarantine_reason).startswith(f"{SOLVED_BY_INITIAL_STATE}: the null run")
    assert unsolved.quarantine_reason is None
    ours = task.model_copy(update={"id": "ours", "metadata": {}})
    audit_initial_state([ours])  # ours to fix: validate's null check fails it instead
    assert ours.quarantine_reason is None


@pytest.mark.skipif(soffice_path() is None, reason="LibreOffice is not installed")
def test_an_input_holding_a_references_computed_values_is_found(tmp_path):
    """Other cells as written (a value where the reference has a formula), the same values:
    found by the scorer's comparison on the reference's cached values."""

    def save(rows: list[list]) -> bytes:
        wb = openpyxl.Workbook()
        for row in rows:
            wb.active.append(row)
        out = io.BytesIO()
        wb.save(out)
        return out.getvalue()

    (tmp_path / "in.xlsx").write_bytes(save([["a", "b", "sum"], [1, 2, 3]]))
    formula = recalculate_bytes(save([["a", "b", "sum"], [1, 2, "=A2+B2"]]))  # cached: 3
    (tmp_path / "gt1.xlsx").write_bytes(formula)
    task = Task(
        id="wb",
        instruction="?",
        files={"w.xlsx": str(tmp_path / "in.xlsx")},
        answer={
            "workbook": "w.xlsx",
            "references": [
                {
                    "name": "gt1",
                    "path": str(tmp_path / "gt1.xlsx"),
                    "check_board": {"1": {"cells": {"values": True}}},
                }
            ],
        },
        oracle_answer="done",
        verifier=VerifierSpec(name="workbook_match"),
    )
    found = f"{SOLVED_BY_INITIAL_STATE}: the untouched workbook matches reference 1"
    assert initial_state_finding(task) == found + " on its cached values"
    (tmp_path / "in.xlsx").write_bytes(save([["a", "b", "sum"], [1, 2, 4]]))
    assert initial_state_finding(task) is None


SHARED = ["dabench", "dacode", "tablebench", "kaggledbqa", "spider_dev", "sheetcopilot"]


@pytest.mark.parametrize("folder", SHARED)
def test_no_shared_task_is_served_that_doing_nothing_solves(folder):
    path = shared_datasets() / folder
    if not path.is_dir():
        pytest.skip(f"shared benchmark data {folder} not found at {path}")
    fmt = "spider" if folder == "spider_dev" else folder
    tasks = load_dataset(f"{fmt}:{os.fspath(path)}").tasks
    served = [t for t in tasks if t.quarantine_reason is None]
    assert served
    for task in served:
        assert initial_state_finding(task) is None, task.id
