"""Procedural solutions, replayed in-process: the printed answer of every covered task's cells
earns its gold from the files alone, the plan never reaches the agent, and an uncovered template
is named, not crashed on."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyst_env.benchmarks.solutions_replay import run_cells
from analyst_env.datasets.procedural import solution_plan, solutions
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
