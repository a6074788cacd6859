"""SheetCopilot, DA-Code and TableBench loaders on the shared data and on tiny synthetic copies."""

from __future__ import annotations

import json
import os
from pathlib import Path

import openpyxl
import pytest

from analyst_env.datasets.dacode import load_dacode
from analyst_env.datasets.registry import load_dataset
from analyst_env.datasets.sheetcopilot import load_sheetcopilot
from analyst_env.datasets.tablebench import load_tablebench

BOARD = "check_board:\n  '1':\n    cells:\n      values: true\n    charts:\n      title: false\n"


def shared(name: str, marker: str) -> Path:
    env = os.environ.get("ANALYST_ENV_SHARED_DATASETS")
    base = Path(env) if env else Path(__file__).resolve().parents[3] / "shared" / "datasets"
    path = base / name
    if not (path / marker).is_file():
        pytest.skip(f"{name} data not found at {path} (set ANALYST_ENV_SHARED_DATASETS)")
    return path


@pytest.mark.dataset
@pytest.mark.parametrize(
    ("fmt", "marker", "n"),
    [
        ("sheetcopilot", "tasks.jsonl", 36),
        ("dacode", "tasks.jsonl", 6),
        ("tablebench", "TableBench_DP_examples.jsonl", 27),
    ],
)
def test_shared_sets_load_completely(fmt, marker, n, tmp_path, monkeypatch):
    monkeypatch.setenv("ANALYST_ENV_CACHE", str(tmp_path))
    ds = load_dataset(f"{fmt}:{shared(fmt, marker)}")
    assert len(ds.tasks) == n and len({t.id for t in ds.tasks}) == n
    for task in ds.tasks:
        assert task.metadata["source"] == fmt and "gold_status" in task.metadata
        for path in task.files.values():
            assert open(path, "rb").read(1)
        public = json.dumps(task.public_view(), default=str)
        assert "oracle" not in public and "_gt" not in public


@pytest.mark.dataset
def test_shared_sheetcopilot_references_and_oracle_code():
    ds = load_sheetcopilot(shared("sheetcopilot", "tasks.jsonl"))
    for task in ds.tasks:
        refs = task.answer["references"]
        assert refs and all(r["path"].endswith(".xlsx") and r["check_board"] for r in refs)
        assert task.files == {task.answer["workbook"]: task.files[task.answer["workbook"]]}
        (step,) = task.oracle_steps
        assert step.tool == "add_and_execute_code_cell"
        assert "task_sheet_answers" not in step.arguments["code"]  # no host paths, literals only
        compile(step.arguments["code"], task.id, "exec")


@pytest.fixture()
def tiny_sheetcopilot(tmp_path):
    root = tmp_path / "sc"
    (root / "task_sheets").mkdir(parents=True)
    wb = openpyxl.Workbook()
    wb.active.append(["Week", "Sales"])
    wb.active.append(["W1", 10])
    wb.save(root / "task_sheets" / "Weekly.xlsx")
    ans = root / "task_sheet_answers_v2" / "Weekly" / "1_Weekly"
    ans.mkdir(parents=True)
    wb.active["C1"], wb.active["C2"] = "Double", "=B2*2"
    wb.save(ans / "1_Weekly_gt1.xlsx")
    (ans / "1_Weekly_gt1_check.yaml").write_text(BOARD)
    row = {
        "Sheet Name": "Weekly",
        "No.": 1,
        "Context": "Weekly sales.",
        "Instructions": "Double the sales in column C.",
    }
    (root / "tasks.jsonl").write_text(json.dumps(row) + "\n")
    return root


def test_tiny_sheetcopilot_copy(tiny_sheetcopilot):
    (task,) = load_sheetcopilot(tiny_sheetcopilot).tasks
    assert task.id == "sheetcopilot-Weekly-1" and "`Weekly.xlsx`" in task.instruction
    assert "Double the sales" in task.instruction and "in place" in task.instruction
    code = task.oracle_steps[0].arguments["code"]
    assert (
        "'C2': '=B2*2'" in code
    )  # no cached value in an openpyxl-saved reference: the formula is written
    assert (
        task.metadata["gold_status"] == "ok"
        and "without cached values" in task.metadata["gold_notes"][0]
    )


def test_tiny_sheetcopilot_errors(tiny_sheetcopilot):
    (
        tiny_sheetcopilot
        / "task_sheet_answers_v2"
        / "Weekly"
        / "1_Weekly"
        / "1_Weekly_gt1_check.yaml"
    ).unlink()
    with pytest.raises(FileNotFoundError, match="check list"):
        load_sheetcopilot(tiny_sheetcopilot)
    with pytest.raises(FileNotFoundError, match="tasks.jsonl"):
        load_sheetcopilot(tiny_sheetcopilot / "nowhere")


def test_tiny_dacode_copy(tmp_path):
    root = tmp_path / "dc"
    for tid in ("csv-1", "txt-1"):
        (root / "source" / tid).mkdir(parents=True)
        (root / "source" / tid / "data.csv").write_text("a,b\n1,2\n")
    (root / "gold" / "csv-1").mkdir(parents=True)
    (root / "gold" / "csv-1" / "result.csv").write_text("s\n3\n")
    tasks = [
        {"id": "csv-1", "instruction": "Sum a and b into result.csv."},
        {"id": "txt-1", "instruction": 'Fill {"total": [...]}'},
    ]
    evals = [
        {
            "id": "csv-1",
            "func": ["compare_csv"],
            "result": [{"file": ["result.csv"]}],
            "options": [{}],
        },
        {
            "id": "txt-1",
            "func": ["compare_text"],
            "result": [{"number": [{"Totl": [3]}]}],
            "options": [{}],
        },
    ]
    (root / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    (root / "eval.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evals))
    csv_task, txt_task = load_dacode(root).tasks
    assert csv_task.verifier.name == "dacode_csv" and csv_task.files == {
        "data.csv": str(root / "source/csv-1/data.csv")
    }
    assert "'s\\n3\\n'" in csv_task.oracle_steps[0].arguments["code"]
    assert txt_task.verifier.name == "dacode_text" and txt_task.oracle_answer == '{"Totl": [3]}'
    assert "totl" in txt_task.metadata["gold_status"]  # the gold key the instruction never names
    evals[0]["func"] = ["compare_ml"]
    (root / "eval.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evals))
    with pytest.raises(ValueError, match="compare_ml"):
        load_dacode(root)


def test_tiny_tablebench_copy(tmp_path):
    recs = [
        {
            "id": "q1",
            "qtype": "NumericalReasoning",
            "qsubtype": "Counting",
            "question": "How many rows?",
            "answer": "2",
            "table": "{'columns': ['a', 'a'], 'data': [[1, 'x'], [2, 'y']]}",
        },
        {
            "id": "q2",
            "qtype": "DataAnalysis",
            "qsubtype": "TrendForecasting",
            "question": "Trend?",
            "answer": "up",
            "table": "{'columns': ['a'], 'data': [[1], [",
        },
    ]
    src = tmp_path / "tb.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in recs))
    q1, q2 = load_tablebench(src, cache_dir=tmp_path / "cache").tasks
    assert open(q1.files["table.csv"]).read().splitlines() == ["a,a", "1,x", "2,y"]
    assert q1.answer == {"answer": "2", "metric": "EM"} and q1.oracle_answer == "Final Answer: 2"
    assert q2.answer["metric"] == "EM_with_error_10" and q2.metadata["gold_status"].startswith(
        "table unreadable"
    )
    src.write_text(json.dumps(recs[0]) + "\n" + json.dumps(recs[0]) + "\n")
    with pytest.raises(ValueError, match="repeats"):
        load_tablebench(src, cache_dir=tmp_path / "cache")
    with pytest.raises(FileNotFoundError):
        load_tablebench(tmp_path / "empty-dir-that-does-not-exist")
