"""``analyst-env datasets prepare``: from an upstream clone's layout to a folder the loader reads.

Each test lays the shared benchmark files out as the upstream repository keeps them
(in a temporary folder: nothing is copied into the project), prepares it, and loads
the result with the real loader.
"""

import json
import shutil
from pathlib import Path

import pytest
from openpyxl import Workbook

from analyst_env.cli import main
from analyst_env.datasets.prepare import PrepareError, prepare
from analyst_env.datasets.registry import load_dataset
from tests.datasets.conftest import shared_datasets


def _shared(name: str) -> Path:
    path = shared_datasets() / name
    if not path.is_dir():
        pytest.skip(f"shared {name} data not found at {path} (set ANALYST_ENV_SHARED_DATASETS)")
    return path


def test_a_dabench_clone_is_found_in_its_upstream_folder_and_loaded_in_place(tmp_path, capsys):
    data = tmp_path / "InfiAgent" / "examples" / "DA-Agent" / "data"
    shutil.copytree(_shared("dabench"), data)
    out = tmp_path / "prepared"
    args = ["datasets", "prepare", "dabench", str(tmp_path / "InfiAgent"), "--out", str(out)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert f"use it as: --dataset dabench:{data}" in printed and "CC BY-NC 4.0" in printed
    assert len(load_dataset(f"dabench:{data}").tasks) == 120 and not out.exists()


def test_a_prepared_folder_is_checked_in_place(tmp_path):
    done = prepare("dabench", _shared("dabench"), out=tmp_path / "unused")
    assert not done.copied and done.path == _shared("dabench").resolve()
    assert done.tasks == 120 and not (tmp_path / "unused").exists()


def test_dacode_keeps_only_tasks_whose_folders_the_clone_has(tmp_path):
    shared = _shared("dacode")
    clone = tmp_path / "da-code" / "da_code"
    shutil.copytree(shared / "source", clone / "source")
    shutil.copytree(shared / "gold", clone / "gold")
    tasks = (shared / "tasks.jsonl").read_text().splitlines()
    evals = (shared / "eval.jsonl").read_text().splitlines()
    missing = {"id": "dm-csv-999", "type": "x", "instruction": "absent", "hardness": "Easy"}
    plot = {"id": "plot-001", "type": "x", "instruction": "a chart", "hardness": "Easy"}
    (clone / "source" / "plot-001").mkdir()
    plot_eval = {"id": "plot-001", "func": ["compare_image"], "result": [{"file": "p.png"}]}
    (clone / "configs" / "task").mkdir(parents=True)
    (clone / "configs" / "eval").mkdir(parents=True)
    rows = [*tasks, json.dumps(missing), json.dumps(plot)]
    (clone / "configs/task/all.jsonl").write_text("\n".join(rows) + "\n")
    (clone / "configs/eval/eval_all.jsonl").write_text("\n".join([*evals, json.dumps(plot_eval)]))
    done = prepare("dacode", tmp_path / "da-code", out=tmp_path / "out")
    assert done.copied and done.left_out == 2 and done.tasks == len(tasks)


def test_sheetcopilot_rows_come_from_dataset_xlsx_and_stray_files_are_left(tmp_path):
    shared = _shared("sheetcopilot")
    base = tmp_path / "SheetCopilot" / "dataset"
    shutil.copytree(shared / "task_sheets", base / "task_sheets")
    shutil.copytree(shared / "task_sheet_answers_v2", base / "task_sheet_answers_v2")
    rows = [json.loads(line) for line in (shared / "tasks.jsonl").read_text().splitlines()]
    header = list(rows[0])
    wb = Workbook()
    wb.active.append(header)
    for row in [*rows, {**rows[0], "No.": 999}]:  # the last has no reference folder
        wb.active.append([row.get(h) for h in header])
    wb.save(base / "dataset.xlsx")
    first = rows[0]
    refs = base / "task_sheet_answers_v2" / first["Sheet Name"]
    folder = refs / f"{first['No.']}_{first['Sheet Name']}"
    (folder / f"~${first['No.']}_{first['Sheet Name']}_gt1.xlsx").write_bytes(b"lock file")

    done = prepare("sheetcopilot", tmp_path / "SheetCopilot", out=tmp_path / "out")
    assert done.left_out == 1 and done.tasks == len(rows)
    assert not list((tmp_path / "out").rglob("~$*"))


def test_every_mistake_is_one_error_line(tmp_path, capsys):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    clone = tmp_path / "clone"
    shutil.copytree(_shared("dabench"), clone)
    (clone / "da-dev-questions.jsonl").rename(clone / "questions.jsonl")
    cases = [
        ["nope", str(tmp_path)],
        ["dabench", str(tmp_path / "absent")],
        ["spider", str(tmp_path)],
        ["dabench", str(clone)],
    ]
    for args in cases:
        assert main(["datasets", "prepare", *args]) == 2
        err = capsys.readouterr().err
        assert err.startswith("analyst-env: error: ") and err.count("\n") == 1, err
    dacode = tmp_path / "da_code"
    for rel in ("configs/task/all.jsonl", "configs/eval/eval_all.jsonl"):
        (dacode / rel).parent.mkdir(parents=True, exist_ok=True)
        (dacode / rel).write_text("")
    (dacode / "source").mkdir()
    (dacode / "gold").mkdir()
    with pytest.raises(PrepareError, match="not empty"):
        prepare("dacode", tmp_path, out=tmp_path / "full")
