"""Procedural solutions, replayed in-process: the printed answer of every covered task's cells
(or the workbook or chart they save) earns its gold from the files alone, the plan never reaches
the agent, and an uncovered template is named, not crashed on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analyst_env.benchmarks.solutions_replay import solved
from analyst_env.datasets.procedural import solution_plan, solutions, solutions_sql
from analyst_env.datasets.procedural.dataset import ProceduralDataset
from analyst_env.datasets.procedural.templates import load_all

SAVED = ("result-workbook", "excel-edit", "charts")  # answers saved as files, not printed


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    ds = ProceduralDataset(7, cache_dir=tmp_path_factory.mktemp("solutions"))
    return ds, [ds.task("train", i) for i in range(150)]


def test_covered_tasks_are_solved_from_their_files(made, tmp_path):
    _, tasks = made
    passed, uncovered = 0, []
    for task in tasks:
        folder = Path(next(iter(task.files.values()))).parent
        plan = solution_plan.read(folder)
        assert plan is not None and plan["template"] == task.metadata["template"]
        try:
            steps = solutions.build(plan, solutions.style_for(task.id))
        except solutions.NoSolution as exc:
            assert task.metadata["template"] in str(exc) or "reducer" in str(exc)
            uncovered.append(task.metadata["template"])
            continue
        assert solved(task, steps, tmp_path / "episode") == 1.0, (task.id, plan["template"])
        passed += 1
    assert passed == len(tasks) and not uncovered, sorted(set(uncovered))  # every category


def test_workbooks_and_charts_are_saved_by_every_style(made, tmp_path):
    """Every template whose answer is a saved workbook or figure (up to two tasks each, every
    style): the file saved in a copy of the task's files scores 1.0, and an edit in place never
    touches the task's own input."""
    ds, tasks = made
    by_template: dict[str, list] = {}
    for task in tasks:
        if task.metadata["category"] in SAVED:
            by_template.setdefault(task.metadata["template"], []).append(task)
    saved = {t.name for t in load_all() if t.category in SAVED}
    for name in sorted(saved - set(by_template)):  # not in the sample: the split's next one
        found = ds.search("train", len(tasks), 1, {"template": name})["tasks"]
        by_template.update({name: found} if found else {})
    assert len(by_template) >= len(saved) - 1, sorted(saved - set(by_template))
    for group in by_template.values():
        for task in group[:2]:
            plan = solution_plan.read(Path(next(iter(task.files.values()))).parent)
            assert plan is not None and solutions.covers(plan)
            before = {name: Path(path).read_bytes() for name, path in task.files.items()}
            for style in solutions.STYLES:
                steps = solutions.build(plan, style)
                assert solved(task, steps, tmp_path / "episode") == 1.0, (task.id, style)
            assert before == {name: Path(path).read_bytes() for name, path in task.files.items()}


def test_a_plan_without_its_sheet_is_named_not_guessed(made):
    _, tasks = made
    (task,) = [t for t in tasks if t.metadata["template"] == "book_pivot"][:1]
    plan = solution_plan.read(Path(next(iter(task.files.values()))).parent)
    assert plan is not None
    with pytest.raises(solutions.NoSolution, match="book_pivot"):
        solutions.build({**plan, "sheet": None})  # a plan written before sheets were recorded


def test_the_plan_is_never_in_what_the_agent_sees(made):
    _, tasks = made
    for task in tasks[:10]:
        view = str(task.public_view())
        assert solution_plan.PLAN_FILE not in view and "plan" not in task.metadata
        assert solution_plan.PLAN_FILE not in task.files


def test_an_unknown_op_is_named_not_crashed_on(made):
    plan = {
        "template": "chart_bar_new",
        "style": "number",
        "decimals": 2,
        "query": {"filters": [], "op": ["chart", "bar"]},
    }
    with pytest.raises(solutions.NoSolution, match="no solution for template chart_bar_new"):
        solutions.build(plan)


def test_every_style_solves_the_same_tasks(made, tmp_path):
    """pandas, mixed and DuckDB SQL each earn the gold from the files, not only the style a task's
    id draws; the SQL style really computes in SQL where it has a form for the op."""
    _, tasks = made
    in_sql = 0
    for task in tasks[:40]:
        folder = Path(next(iter(task.files.values()))).parent
        plan = solution_plan.read(folder)
        assert plan is not None
        if not solutions.covers(plan):
            continue
        for style in solutions.STYLES:
            steps = solutions.build(plan, style)
            assert solved(task, steps, tmp_path / "episode") == 1.0, (task.id, style)
        sql_cells = " ".join(s.arguments.get("code", "") for s in solutions.build(plan, "sql"))
        in_sql += "duckdb.sql(" in sql_cells
    assert in_sql >= 10, in_sql


def test_the_sql_style_looks_through_the_sql_tool():
    plan = {"fact": ["data/2024 Sales.csv", None], "dim": None}
    look = solutions_sql.look(plan)
    assert look is not None and look.tool == "run_sql"
    assert look.arguments["query"] == "SELECT COUNT(*) AS n_rows FROM t_2024_sales"
    two_dbs = {"fact": ["a.sqlite", "orders"], "dim": ["b.sqlite", "customers"]}
    assert solutions_sql.look(two_dbs) is None  # which database is main is not certain


def test_generate_with_solutions_writes_programs_that_solve_the_frozen_files(tmp_path, capsys):
    """Each line of solutions.jsonl, run in its task's frozen folder, earns that task's gold;
    the file is outside every task, so ``tasks:DIR`` loads and serves the tasks as before."""
    from analyst_env.cli import main
    from analyst_env.datasets.procedural.solution_files import SOLUTIONS_FILE
    from analyst_env.datasets.procedural.taskdir import load_task_dir
    from analyst_env.task_format import ToolCall

    out = tmp_path / "set"
    args = ["generate", "--count", "8", "--seed", "7", "--out", str(out), "--with-solutions"]
    assert main([*args, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    lines = [json.loads(line) for line in (out / SOLUTIONS_FILE).read_text().splitlines()]
    assert summary["solutions"] == len(lines) == 8 and summary["without_solution"] == {}
    tasks = load_task_dir(out).by_id()
    for line in lines:
        task = tasks[line["task_id"]]
        assert line["style"] in solutions.STYLES and line["level"] == task.metadata["level"]
        steps = [ToolCall(**step) for step in line["steps"]]
        assert solved(task, steps, tmp_path / "episode") == 1.0, task.id
    for task in tasks.values():
        assert not any(SOLUTIONS_FILE in path for path in task.files.values())
        assert "add_and_execute_code_cell" not in json.dumps(task.public_view())
