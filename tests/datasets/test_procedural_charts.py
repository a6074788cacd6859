"""Procedural chart tasks, scored by chart_figure on the figure the agent saves.

For each chart template the oracle cell is run for real (a Python process in a folder
holding the task's files, as the agent's kernel would); its figure must score 1, while
no figure, the gold's figure with one value changed, the same series drawn as another
chart type, a bar chart left unsorted where sorted was asked and an answer that only
states the values all score 0.
"""

from __future__ import annotations

import pytest
from template_runs import episode_folder, made, run_cell, scored

from analyst_env.datasets.procedural.templates import load_all
from analyst_env.evaluation.gold_leaks import gold_values
from analyst_env.task_format import Task
from analyst_env.verifiers.adversarial import probe_task

SEED = 424242
CHART_TEMPLATES = [t.name for t in load_all() if t.category == "charts"]
OTHER_KIND = {"bar": "ax.plot", "line": "ax.bar", "scatter": "ax.plot", "histogram": "ax.plot"}


def _wrong_series(task: Task) -> str:
    """The oracle cell drawing the gold with its largest value (or count) raised by a tenth."""
    gold = task.answer
    code = task.oracle_steps[0].arguments["code"]
    key = {"histogram": "counts", "scatter": "points"}.get(gold["kind"], "values")
    series = gold[key]
    if key == "points":
        changed = [[x, y * 1.1 + 1] if i == 0 else [x, y] for i, (x, y) in enumerate(series)]
        xs, ys = zip(*series, strict=True)
        new_ys = [p[1] for p in changed]
        return code.replace(repr(list(ys)), repr(new_ys))
    top = max(range(len(series)), key=lambda i: series[i])
    changed = [v * 1.1 + 1 if i == top else v for i, v in enumerate(series)]
    return code.replace(repr(series), repr(changed))


@pytest.mark.parametrize("name", CHART_TEMPLATES)
def test_the_oracle_figure_scores_one_and_wrong_figures_zero(name, tmp_path):
    for n, task in enumerate(made(SEED, name, tmp_path / "made", want=1)):
        assert task.verifier.name == "chart_figure" and task.oracle_steps
        assert task.answer["figure"] in task.instruction and task.metadata["category"] == "charts"
        assert scored(task, episode_folder(task, tmp_path / f"null-{n}")) == 0.0
        looked_for = gold_values(task)  # validate's leak scan: the series, not what is asked
        assert not {"chart.svg", task.answer["kind"], task.answer["xlabel"]} & looked_for

        done = episode_folder(task, tmp_path / f"oracle-{n}")
        run_cell(task.oracle_steps[0].arguments["code"], done)
        assert scored(task, done) == 1.0

        wrong = episode_folder(task, tmp_path / f"wrong-{n}")
        wrong_code = _wrong_series(task)
        assert wrong_code != task.oracle_steps[0].arguments["code"]
        run_cell(wrong_code, wrong)
        assert scored(task, wrong) == 0.0

        kind = task.answer["kind"]
        other = episode_folder(task, tmp_path / f"other-{n}")
        code = task.oracle_steps[0].arguments["code"]
        if kind == "histogram":
            swapped = code.replace(
                "ax.hist(edges[:-1], bins=edges, weights=", "ax.plot(edges[:-1], "
            )
        else:
            call = {"bar": "ax.bar(", "line": "ax.plot(", "scatter": "ax.scatter("}[kind]
            swapped = code.replace(call, OTHER_KIND[kind] + "(").replace(", marker='o'", "")
        assert swapped != code
        run_cell(swapped, other)
        assert scored(task, other) == 0.0

        stated = f"The values are {task.answer}"  # the answer text is never read
        assert scored(task, episode_folder(task, tmp_path / f"said-{n}"), stated) == 0.0

        probed = probe_task(task)  # validate --probe: hand-made files and answers
        assert probed.probed and probed.adversarial_tried >= 6
        assert probed.adversarial_nonzero == []


def test_a_bar_chart_left_unsorted_scores_zero(tmp_path):
    tasks = made(SEED, "chart_bar_sorted", tmp_path / "made", want=4)
    task = next(t for t in tasks if sorted(t.answer["categories"]) != t.answer["categories"])
    gold, code = task.answer, task.oracle_steps[0].arguments["code"]
    pairs = sorted(zip(gold["categories"], gold["values"], strict=True))  # A to Z, not by value
    unsorted = code.replace(repr(gold["categories"]), repr([c for c, _ in pairs])).replace(
        repr(gold["values"]), repr([v for _, v in pairs])
    )
    cwd = episode_folder(task, tmp_path / "unsorted")
    run_cell(unsorted, cwd)
    assert scored(task, cwd) == 0.0
