"""Procedural workbook tasks: result workbooks and in-place edits, scored by workbook_match.

Each template's oracle cell is run for real (a Python process in a folder
holding the task's files, as the agent's kernel would); its workbook must
score 1, and the untouched input, a wrong cell or a lost input row must
score 0. The reference stays on the host: it is never one of the task's files.
"""

from __future__ import annotations

from pathlib import Path

import openpyxl
import pytest
from template_runs import episode_folder, made, run_cell, scored

from analyst_env.datasets.procedural import ProceduralDataset
from analyst_env.datasets.procedural.taskdir import load_task_dir, write_task_dir
from analyst_env.datasets.procedural.templates import load_all
from analyst_env.task_format import answer_references

SEED = 31337
BOOK_TEMPLATES = [t.name for t in load_all() if t.category in ("excel-edit", "result-workbook")]


def _first_number_cell(ws):
    for row in ws.iter_rows(min_row=2):
        for cell in row:
            if isinstance(cell.value, (int, float)) and not isinstance(cell.value, bool):
                return cell
    return None


@pytest.mark.parametrize("name", BOOK_TEMPLATES)
def test_the_oracle_workbook_scores_one_and_a_wrong_or_missing_one_zero(name, tmp_path):
    for n, task in enumerate(made(SEED, name, tmp_path / "made")):
        refs = answer_references(task.answer)
        assert refs and all(Path(r["path"]).is_file() for r in refs)
        assert not {str(Path(r["path"])) for r in refs} & set(task.files.values())
        assert task.verifier.name == "workbook_match" and task.oracle_steps
        out = task.metadata["output"]
        assert out == ("edit" if name.startswith("edit_") else "workbook")

        untouched = episode_folder(task, tmp_path / f"null-{n}")
        assert scored(task, untouched) == 0.0  # no result.xlsx, or the input as it was

        done = episode_folder(task, tmp_path / f"oracle-{n}")
        run_cell(task.oracle_steps[0].arguments["code"], done)
        assert scored(task, done) == 1.0
        book_name = task.answer["workbook"]

        wrong = episode_folder(task, tmp_path / f"wrong-{n}")
        run_cell(task.oracle_steps[0].arguments["code"], wrong)
        wb = openpyxl.load_workbook(wrong / book_name)
        if name == "edit_lookup_column":
            ws = wb.worksheets[0]
            column = [c for c in ws[ws.max_column] if c.row > 1]
            filled = next(c for c in column if c.value is not None)
            filled.value = "Not " + str(filled.value)
        else:
            cell = _first_number_cell(wb.worksheets[-1])
            assert cell is not None
            cell.value = cell.value + 1
        wb.save(wrong / book_name)
        assert scored(task, wrong) == 0.0

        if out == "edit":  # the edit must keep the records it was given
            lost = episode_folder(task, tmp_path / f"lost-{n}")
            run_cell(task.oracle_steps[0].arguments["code"], lost)
            wb = openpyxl.load_workbook(lost / book_name)
            wb.worksheets[0].delete_rows(wb.worksheets[0].max_row)
            wb.save(lost / book_name)
            assert scored(task, lost) == 0.0


def test_a_pandas_rewrite_of_the_whole_workbook_still_counts_as_an_edit_in_place(tmp_path):
    """An agent that reads every sheet with pandas and writes them all back (plus its sheet)
    keeps the input's cells: blanks stay blank, text numbers stay text."""
    (task,) = made(SEED, "edit_summary_sheet", tmp_path / "made", want=1)
    cwd = episode_folder(task, tmp_path / "pandas")
    ref = openpyxl.load_workbook(answer_references(task.answer)[0]["path"])
    summary = [[c.value for c in row] for row in ref.worksheets[-1].iter_rows()]
    book = task.answer["workbook"]
    code = f"""
import pandas as pd
sheets = pd.read_excel({book!r}, sheet_name=None)
summary = pd.DataFrame({summary[1:]!r}, columns={summary[0]!r})
with pd.ExcelWriter({book!r}) as w:
    for name, frame in sheets.items():
        frame.to_excel(w, sheet_name=name, index=False)
    summary.to_excel(w, sheet_name={ref.sheetnames[-1]!r}, index=False)
"""
    run_cell(code, cwd)
    assert scored(task, cwd) == 1.0


def test_workbook_tasks_survive_the_cache_and_a_portable_task_directory(tmp_path):
    ds = ProceduralDataset(SEED, cache_dir=tmp_path / "cache", keep_dirs=2)
    index = next(i for i in range(400) if ds.task("train", i).verifier.name == "workbook_match")
    task = ds.task("train", index)
    ref = Path(answer_references(task.answer)[0]["path"])
    assert ref.is_relative_to(ds.root) and ref.is_file()
    for i in range(3):  # evict it, then make it again from its seed
        ds.task("test", i)
    again = ds.task("train", index)
    assert again.answer == task.answer and again.instruction == task.instruction

    write_task_dir([again], tmp_path / "frozen", {"name": "frozen"})
    (loaded,) = load_task_dir(str(tmp_path / "frozen")).tasks
    copied = Path(answer_references(loaded.answer)[0]["path"])
    assert copied.is_relative_to((tmp_path / "frozen").resolve()) and copied.is_file()
    assert copied.read_bytes() == ref.read_bytes()
    cwd = episode_folder(loaded, tmp_path / "frozen-oracle")
    run_cell(loaded.oracle_steps[0].arguments["code"], cwd)
    assert scored(loaded, cwd) == 1.0
