"""Procedural solutions, replayed in-process: the printed answer of every covered task's cells
earns its gold from the files alone, the plan never reaches the agent, and an uncovered template
is named, not crashed on."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyst_env.benchmarks.solutions_replay import run_cells
from analyst_env.datasets.procedural import solution_plan, solutions, solutions_sql
from analyst_env.datasets.procedural.dataset import ProceduralDataset
from analyst_env.verifiers import score


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    ds = ProceduralDataset(7, cache_dir=tmp_path_factory.mktemp("solutions"))
    return ds, [ds.task("train", i) for i in range(150)]


def test_covered_tasks_are_solved_from_their_files(made):
    ds, tasks = made
    solved, uncovered = 0, []
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
        answer = solutions.answer_from(run_cells(steps, folder))
        assert score(task.verifier, answer, task.answer) == 1.0, (task.id, plan["template"], answer)
        solved += 1
    assert solved >= len(tasks) * 3 // 4, (solved, sorted(set(uncovered)))


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


def test_every_style_solves_the_same_tasks(made):
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
            answer = solutions.answer_from(run_cells(steps, folder))
            assert score(task.verifier, answer, task.answer) == 1.0, (task.id, style, answer)
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
