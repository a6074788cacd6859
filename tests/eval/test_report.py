"""The report built from episode rows, and its HTML page: numbers, facets, escaping, plots."""

from __future__ import annotations

import itertools
import random
from math import comb

import pytest

from analyst_env.datasets import load_dataset
from analyst_env.evaluation.html_report import render_html
from analyst_env.run_records.report import build_report, pass_at_k, task_facets


def row(task_id, sample, reward, **extra):
    return {
        "task_id": task_id,
        "sample": sample,
        "reward": reward,
        "end_reason": "final_answer",
        "turns": 2,
        "tool_calls": 2,
        "tools": {"run_sql": 1, "final_answer": 1},
        "prompt_tokens": 50,
        "completion_tokens": 10,
        "dataset": "d",
        "kind": "csv",
        "level": "easy",
        "category": "sum",
        **extra,
    }


@pytest.mark.parametrize("n, c", [(5, 0), (5, 2), (6, 3), (4, 4)])
def test_pass_at_k_is_the_chance_that_some_draw_of_k_passes(n, c):
    """Checked by counting every draw of k of the n samples, not by the formula."""
    outcomes = [True] * c + [False] * (n - c)
    for k in range(1, n + 1):
        draws = list(itertools.combinations(outcomes, k))
        assert len(draws) == comb(n, k)
        assert pass_at_k(n, c, k) == pytest.approx(sum(any(d) for d in draws) / len(draws))
    with pytest.raises(ValueError):
        pass_at_k(n, c, n + 1)


def test_the_report_averages_tasks_and_keeps_the_first_fields():
    rows = [
        row("a", 0, 1.0),
        row("a", 1, 0.0),
        row("a", 2, 1.0),
        row("a", 3, 1.0),
        row("b", 0, 0.0, end_reason="no_tool_call", level="hard"),
        row("b", 1, 0.5, level="hard"),
        row("b", 2, 0.0, level="hard", error="boom", end_reason="model_error"),
        row("b", 3, 0.0, level="hard", end_reason="max_turns"),
    ]
    random.Random(0).shuffle(rows)
    report = build_report({"dataset": "d", "policy": "model", "samples": 4}, rows)
    assert report["n"] == 2 and report["episodes"] == 8 and report["complete"]
    assert report["mean_reward"] == pytest.approx((0.75 + 0.125) / 2)
    assert report["pass_at_k"] == pytest.approx({"1": 0.375, "2": 0.5, "4": 0.5})
    assert report["failures"] == {
        "wrong_answer": 2,
        "no_tool_call": 1,
        "model_error": 1,
        "max_turns": 1,
    }
    assert report["summary"]["level"]["hard"]["mean_reward"] == 0.125
    assert report["summary"]["level"]["easy"]["accuracy"] == 0.75
    assert report["errors"] == 1 and report["tokens"]["total"] == 8 * 60
    b = next(t for t in report["tasks"] if t["task_id"] == "b")
    assert b["rewards"] == [0.0, 0.5, 0.0, 0.0] and b["error"] == "boom"


def test_an_unfinished_run_is_not_complete():
    report = build_report({"samples": 2, "tasks_planned": 3}, [row("a", 0, 1.0), row("a", 1, 1.0)])
    assert not report["complete"] and report["pass_at_k"] == {"1": 1.0, "2": 1.0}


def test_facets_from_the_starter_set():
    task = load_dataset("starter").tasks[0]
    facets = task_facets(task)
    assert facets == {
        "dataset": "starter",
        "kind": task.metadata["kind"],
        "level": task.metadata["level"],
        "category": task.metadata["template"],
    }


def test_the_html_report_escapes_what_models_and_datasets_wrote():
    hostile = "<script>alert(1)</script>"
    rows = [
        row(
            hostile,
            0,
            0.0,
            error=f"<img src=x onerror=alert(2)>{hostile}",
            category=hostile,
            end_reason="no_tool_call",
        ),
        row("ok", 0, 1.0),
    ]
    html = render_html(
        build_report({"dataset": hostile, "policy": "model", "model": {"name": hostile}}, rows)
    )
    assert "<script" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.count("<img alt=") >= 4  # reward by level and category, turns, tool calls, ...
    assert "Failure reasons" in html and "no_tool_call" in html


def test_levels_read_from_easy_to_hard_then_others_alphabetically():
    from analyst_env.evaluation.html_report import _facet_order

    rows = [row(f"t-{lv}", 0, 1.0, level=lv) for lv in ("hard", "easy", "expert", "medium")]
    html = render_html(build_report({"dataset": "d", "policy": "oracle"}, rows))
    by_level = html[html.index("<h2>By level</h2>") :]
    at = [by_level.index(f"<td>{lv}</td>") for lv in ("easy", "medium", "hard", "expert")]
    assert at == sorted(at)
    assert sorted(["b", "hard", "a", "easy"], key=_facet_order) == ["easy", "hard", "a", "b"]
