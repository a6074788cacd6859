"""Worked solutions on a real server on loopback: ``analyst-env export sft`` keeps replays only at
reward 1.0, in the chat format ``export trajectories --format sft`` and the adapters use, and
``validate``'s ``solution`` check fails a task whose solution does not score 1.0.

The in-process run starts the server the way ``validate`` does; the ``--url`` runs use one
server of ``procedural:7`` from ``tests/support.py``. Solutions of seed 8 replayed there meet
other data under the same task ids, so they must be dropped, not written.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from support import procedural_server

from analyst_env import cli
from analyst_env.datasets.procedural import solution_plan
from analyst_env.datasets.procedural.dataset import ProceduralDataset
from analyst_env.evaluation.validation import report, summary, validate_task
from analyst_env.prompts import SYSTEM_PROMPT


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """One live server of procedural:7 for the ``--url`` and ``validate`` tests: (url, dataset)."""
    with procedural_server(tmp_path_factory.mktemp("served"), 7, 6) as (url, runtime):
        (dataset,) = [d for d in runtime.unbounded if isinstance(d, ProceduralDataset)]
        yield url, dataset


@pytest.fixture
def served(live):
    return live[0]


@pytest.fixture
def dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("ANALYST_ENV_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ANALYST_ENV_STATE_DIR", str(tmp_path / "state"))
    return tmp_path


def export(capsys, out, *extra: str) -> tuple[int, dict, list[dict]]:
    code = cli.main(["export", "sft", "--out", str(out), "--json", *extra])
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    lines = (out / "sft.jsonl").read_text().splitlines()
    return code, summary, [json.loads(line) for line in lines]


def check_record(record: dict) -> None:
    """One kept trajectory: system, user, then assistant tool calls each answered by its tool
    message, the last call ``final_answer``; reward 1.0 and the tool schemas."""
    messages = record["messages"]
    assert messages[0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert (
        messages[1]["role"] == "user"
        and "Files in your working directory" in (messages[1]["content"])
    )
    turns = messages[2:]
    assert len(turns) >= 6 and len(turns) % 2 == 0
    for call, reply in zip(turns[::2], turns[1::2], strict=True):
        (tool_call,) = call["tool_calls"]
        assert call["role"] == "assistant" and tool_call["type"] == "function"
        assert isinstance(json.loads(tool_call["function"]["arguments"]), dict)
        assert reply == {
            "role": "tool",
            "tool_call_id": tool_call["id"],
            "name": tool_call["function"]["name"],
            "content": reply["content"],
        }
        assert "plan.json" not in reply["content"]  # the plan never reaches the sandbox
    assert turns[-2]["tool_calls"][0]["function"]["name"] == "final_answer"
    assert record["reward"] == 1.0 and record["end_reason"]
    assert {t["function"]["name"] for t in record["tools"]} >= {"final_answer", "run_sql"}


def test_replayed_solutions_are_written_in_the_sft_format(dirs, capsys):
    out = dirs / "export"
    code, summary, records = export(
        capsys, out, "--dataset", "procedural:7", "--count", "4", "--start", "1"
    )
    assert code == 0 and summary["dropped"] == []
    assert summary["kept"] == len(records) == summary["replayed"] >= 3
    assert summary["tasks"] == 4 and sum(summary["uncovered_by_category"].values()) == 4 - len(
        records
    )
    for record in records:
        check_record(record)
    assert len({r["style"] for r in records}) >= 2
    assert set(summary["turns_by_level"]) <= {"easy", "medium", "hard"}
    mixed = [r for r in records if r["style"] == "mixed"]  # its `ls -la` shows the sandbox
    assert mixed
    assert all(
        r["messages"][2]["tool_calls"][0]["function"]["name"] == "execute_shell_command"
        for r in mixed
    )


def test_a_server_given_by_url_replays_the_sql_style(dirs, served, capsys):
    code, summary, records = export(
        capsys, dirs / "sql", "--dataset", "procedural:7", "--count", "3", "--start", "20",
        "--style", "sql", "--url", served,
    )  # fmt: skip
    assert code == 0 and summary["dropped"] == [] and records
    for record in records:
        check_record(record)
        assert record["style"] == "sql"
        cells = " ".join(m["tool_calls"][0]["function"]["arguments"] for m in record["messages"]
                         if m["role"] == "assistant")  # fmt: skip
        assert "duckdb" in cells


def test_replays_that_score_below_one_are_dropped_and_named(dirs, served, capsys):
    # solutions of seed 8 replayed on a server of seed 7: other data under the same task ids
    code, summary, records = export(
        capsys, dirs / "wrong", "--dataset", "procedural:8", "--count", "4", "--url", served
    )
    assert code == 1
    assert summary["dropped"] and len(records) + len(summary["dropped"]) == summary["replayed"]
    assert all(r["reward"] == 1.0 for r in records)
    assert {d["task_id"] for d in summary["dropped"]} <= {f"procedural-train-{i}" for i in range(4)}


def test_export_sft_needs_a_procedural_dataset(dirs, capsys):
    assert cli.main(["export", "sft", "--dataset", "starter", "--count", "2"]) == 2
    assert "procedural:SEED" in capsys.readouterr().err


def test_validate_replays_the_worked_solution_of_each_task(live):
    url, dataset = live
    tasks = [dataset.task("train", i) for i in (0, 2)]  # 0 has a solution, 2 not yet
    rows = [asyncio.run(validate_task(url, task)) for task in tasks]
    assert [row["solution"] for row in rows] == [1.0, None]
    assert all(row["status"] == "pass" for row in rows), rows
    result = report("procedural:7", rows)
    assert result["solutions"] == {"replayed": 1, "scored_1": 1, "without_solution": 1}
    assert "solutions=1/1" in summary(result)


def test_a_plan_that_does_not_fit_its_files_fails_the_solution_check(live):
    url, dataset = live
    task = dataset.task("train", 5)
    folder = Path(next(iter(task.files.values()))).parent
    plan = solution_plan.read(folder)
    assert plan is not None
    plan["cols"]["m1"] = "no_such_column"
    solution_plan.write(folder, plan)
    row = asyncio.run(validate_task(url, task))
    assert row["status"] == "fail" and row["oracle"] == 1.0 and row["solution"] == 0.0
    (failure,) = row["failures"]
    assert failure["check"] == "solution" and "scored 0.0" in failure["reason"]
