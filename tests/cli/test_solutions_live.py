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
from analyst_env.datasets.procedural import solution_plan, solutions
from analyst_env.datasets.procedural.dataset import ProceduralDataset
from analyst_env.datasets.procedural.templates import load_all
from analyst_env.evaluation.solution_replay import replay
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
        capsys, out, "--dataset", "procedural:7", "--count", "4", "--start", "2"
    )  # generator 12: cohorts (sql), outliers (pandas), a result workbook, window (mixed)
    assert code == 0 and summary["dropped"] == [] and summary["uncovered_by_category"] == {}
    assert summary["tasks"] == summary["kept"] == len(records) == summary["replayed"] == 4
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


def test_export_sft_needs_a_procedural_dataset_or_a_frozen_set(dirs, capsys):
    assert cli.main(["export", "sft", "--dataset", "starter", "--count", "2"]) == 2
    assert "procedural:SEED or tasks:DIR" in capsys.readouterr().err
    assert cli.main(["export", "sft", "--dataset", "procedural:7"]) == 2
    assert "needs --count" in capsys.readouterr().err


def test_a_frozen_sets_written_solutions_are_replayed(dirs, served, capsys):
    """``generate --with-solutions`` then ``export sft --dataset tasks:DIR``: the solutions come
    from solutions.jsonl (a frozen set has no plans); one whose line was altered to answer
    wrongly is dropped, one whose line was removed counts as uncovered."""
    frozen = dirs / "frozen"
    assert cli.main(["generate", "--seed", "7", "--count", "3", "--out", str(frozen),
                     "--with-solutions", "--json"]) == 0  # fmt: skip
    capsys.readouterr()
    path = frozen / "solutions.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["task_id"] for line in lines] == [f"procedural-train-{i}" for i in range(3)]
    lines[1]["steps"][-1] = {
        "tool": "add_and_execute_code_cell",
        "arguments": {"code": "print('not the answer')"},
    }
    path.write_text("".join(json.dumps(line) + "\n" for line in (lines[0], lines[1])))
    assert cli.main(["export", "sft", "--dataset", f"tasks:{frozen}", "--style", "sql"]) == 2
    assert "--style is for procedural" in capsys.readouterr().err
    code, summary, records = export(capsys, dirs / "out", "--dataset", f"tasks:{frozen}")
    assert code == 1 and summary["tasks"] == 3 and summary["replayed"] == 2
    assert [r["task_id"] for r in summary["dropped"]] == ["procedural-train-1"]
    assert sum(summary["uncovered_by_category"].values()) == 1
    (record,) = records
    check_record(record)
    assert record["style"] == lines[0]["style"]
    path.write_text("{not json\n")
    assert cli.main(["export", "sft", "--dataset", f"tasks:{frozen}", "--url", served]) == 2
    assert "solutions.jsonl, line 1: not a solution" in capsys.readouterr().err


def test_validate_replays_the_worked_solution_of_each_task(live):
    url, dataset = live
    tasks = [dataset.task("train", i) for i in (0, 4)]  # 4 is a result workbook
    rows = [asyncio.run(validate_task(url, task)) for task in tasks]
    assert [row["solution"] for row in rows] == [1.0, 1.0]
    assert all(row["status"] == "pass" for row in rows), rows
    result = report("procedural:7", rows)
    assert result["solutions"] == {"replayed": 2, "scored_1": 2, "without_solution": 0}
    assert "solutions=2/2" in summary(result)


def test_validate_replays_a_frozen_sets_written_solutions(dirs, capsys):
    frozen = dirs / "frozen"
    assert cli.main(["generate", "--seed", "7", "--count", "2", "--out", str(frozen),
                     "--with-solutions", "--json"]) == 0  # fmt: skip
    out = dirs / "report.json"
    command = ["validate", "--dataset", f"tasks:{frozen}", "--json", str(out)]
    assert cli.main(command) == 0
    assert json.loads(out.read_text())["solutions"] == {
        "replayed": 2,
        "scored_1": 2,
        "without_solution": 0,
    }
    path = frozen / "solutions.jsonl"
    first = json.loads(path.read_text().splitlines()[0])
    first["steps"][-1] = {
        "tool": "add_and_execute_code_cell",
        "arguments": {"code": "print('not the answer')"},
    }
    path.write_text(json.dumps(first) + "\n")
    assert cli.main([*command, "--limit", "1"]) == 1
    (row,) = json.loads(out.read_text())["tasks"]
    assert row["solution"] == 0.0 and row["oracle"] == 1.0
    assert [f["check"] for f in row["failures"]] == ["solution"]
    capsys.readouterr()


SAVED_TASKS = {  # procedural:7 (generator 12), train: the first two tasks of each template
    "book_monthly": (279, 283),
    "book_pivot": (21, 30),
    "book_summary_attr": (12, 236),
    "book_summary_g1": (321, 415),
    "book_summary_g2": (4, 14),
    "chart_bar_average": (18, 49),
    "chart_bar_sorted": (16, 60),
    "chart_histogram": (101, 145),
    "chart_line_monthly": (105, 268),
    "chart_scatter_averages": (35, 345),
    "edit_lookup_column": (10, 274),
    "edit_monthly_sheet": (50, 142),
    "edit_summary_sheet": (62, 76),
}


def test_saved_workbooks_and_charts_score_one_on_the_server(live):
    """Every template whose answer is a file (a result workbook, an edited input workbook, a
    chart): its solutions, in turn in each style, save the file in a real sandbox and the
    server's scorer, reading it from there, gives 1.0."""
    url, dataset = live
    saved = {
        t.name for t in load_all() if t.category in ("result-workbook", "excel-edit", "charts")
    }
    assert set(SAVED_TASKS) == saved
    picked = [(template, i) for template, ids in SAVED_TASKS.items() for i in ids]
    tasks = [dataset.task("train", i) for _, i in picked]
    assert [t.metadata["template"] for t in tasks] == [template for template, _ in picked]
    gate = asyncio.Semaphore(3)

    async def one(n: int, task) -> dict:
        async with gate:
            return await replay(url, task, style=solutions.STYLES[n % len(solutions.STYLES)])

    async def every() -> list[dict]:
        return list(await asyncio.gather(*(one(n, t) for n, t in enumerate(tasks))))

    rows = asyncio.run(every())
    assert [(r["task_id"], r["reward"]) for r in rows] == [(t.id, 1.0) for t in tasks], [
        r.get("error") for r in rows
    ]
    for row in rows:
        check_record(row["record"])


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
