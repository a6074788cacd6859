"""``analyst-env validate``: passes sound datasets, and names the check a broken task fails.

The command runs in-process (``cli.main``) so test-only scorers registered here
are the ones the in-process server uses; the server, sandboxes and client are
the real ones. Broken datasets are built in a tmp dir and served under a
test-only ``hvtest:PATH`` format.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import registered_datasets
from support import SECRET_TOTAL, make_tiny_dataset

from analyst_env import cli
from analyst_env.datasets import registry
from analyst_env.evaluation.gold_leaks import (
    find_leak,
    gold_values,
    leak_patterns,
    value_pattern,
)
from analyst_env.server.local_server import BackgroundServer
from analyst_env.task_format import Dataset, Task, ToolCall, VerifierSpec
from analyst_env.verifiers import scorers

NUMERIC = VerifierSpec(name="numeric", params={"abs_tol": 1e-6})


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict[str, Task]:
    return make_tiny_dataset(tmp_path_factory.mktemp("hv-tiny")).by_id()


@pytest.fixture
def served(monkeypatch):
    """Register datasets under ``hvtest:NAME`` for the duration of a test."""
    monkeypatch.setitem(registry.FORMATS, "hvtest", "registered_datasets:load")

    def serve(name: str, tasks: list[Task]) -> str:
        monkeypatch.setitem(registered_datasets.DATASETS, name, Dataset(name=name, tasks=tasks))
        return f"hvtest:{name}"

    return serve


def validate(tmp_path: Path, capsys, spec: str, *extra: str) -> tuple[int, dict, str]:
    out = tmp_path / "report.json"
    code = cli.main(
        ["validate", "--dataset", spec, "--json", str(out), "--concurrency", "4", *extra]
    )
    captured = capsys.readouterr()
    return code, json.loads(out.read_text()), captured.out + captured.err


def sound_tasks(tiny: dict[str, Task]) -> list[Task]:
    """Tasks that must pass: the tiny CSV/SQLite/Excel tasks, oracle steps, a verify hook."""
    csv = tiny["tiny-csv"]
    return [
        csv,
        tiny["tiny-sqlite"],
        tiny["tiny-excel"],
        # The oracle's own run_sql prints the gold: not a leak (only its reset is scanned).
        csv.model_copy(
            update={
                "id": "hv-oracle-steps",
                "oracle_steps": [
                    ToolCall(tool="run_sql", arguments={"query": "SELECT SUM(amount) FROM sales"})
                ],
            }
        ),
        Task(
            id="hv-verify-hook",
            # "done" is also a protocol field name: dict keys are not gold leaks.
            instruction=(
                "Submit the five-letter word for finished, minus its last letter, in lowercase."
            ),
            answer="done",
            oracle_answer="done",
            verifier=VerifierSpec(name="exact"),
            verify=["grep -qx done logs/verifier/answer.txt"],
        ),
    ]


def test_a_sound_dataset_passes_and_broken_upstream_is_listed(tmp_path, capsys, tiny, served):
    broken_gold = tiny["tiny-csv"].model_copy(
        update={
            "id": "hv-upstream",
            "oracle_answer": "1",
            "metadata": {"gold_status": "label contradicts data"},
        }
    )
    sound_gold = tiny["tiny-excel"].model_copy(
        update={"id": "hv-gold-ok", "metadata": {"gold_status": "ok"}}
    )
    tasks = [*sound_tasks(tiny), sound_gold, broken_gold]
    code, report, output = validate(tmp_path, capsys, served("sound", tasks))
    assert code == 0, output
    assert report["dataset"] == "hvtest:sound" and report["n"] == 7 and report["passed"] == 6
    assert report["failed"] == []
    (upstream,) = report["broken_upstream"]
    assert (
        upstream["task_id"] == "hv-upstream" and upstream["gold_status"] == "label contradicts data"
    )
    assert [f["check"] for f in upstream["failures"]] == ["oracle"]
    rows = {r["task_id"]: r for r in report["tasks"]}
    assert (
        rows["hv-oracle-steps"]["leak"] is None
        and rows["hv-oracle-steps"]["gold_values_checked"] > 0
    )
    assert rows["hv-verify-hook"]["gold_values_checked"] == 1
    assert all(
        (r["oracle"], r["null"], r["repeat"]) == (1.0, 0.0, 1.0)
        for t, r in rows.items()
        if t != "hv-upstream"
    )
    assert "broken_upstream=1" in output and "failed=0" in output
    assert "hv-upstream" in output and "broken_upstream" in output


def _accept_anything(submitted: str, gold) -> float:
    return 1.0


def _flaky_scorer(calls_file):
    # Scorers run in a forked process each time, so the call count lives in a file, not in memory.
    def flaky(submitted: str, gold) -> float:
        if not submitted:
            return 0.0
        calls = int(calls_file.read_text() or 0) if calls_file.exists() else 0
        calls_file.write_text(str(calls + 1))
        return 1.0 if calls == 0 else 0.5  # the first oracle run scores 1, the repeat 0.5

    return flaky


@pytest.mark.parametrize("broken", ["oracle", "null", "repeat", "leak"])
def test_a_broken_task_fails_naming_its_check(tmp_path, capsys, tiny, served, monkeypatch, broken):
    csv = tiny["tiny-csv"]
    if broken == "oracle":
        bad = csv.model_copy(update={"oracle_answer": "7000"})
    elif broken == "null":
        monkeypatch.setitem(scorers.SCORERS, "hv-accept-anything", _accept_anything)
        bad = csv.model_copy(update={"verifier": VerifierSpec(name="hv-accept-anything")})
    elif broken == "repeat":
        monkeypatch.setitem(scorers.SCORERS, "hv-flaky", _flaky_scorer(tmp_path / "flaky-calls"))
        bad = csv.model_copy(update={"verifier": VerifierSpec(name="hv-flaky")})
    else:
        bad = csv.model_copy(update={"setup": [f"touch {SECRET_TOTAL}.txt"]})
    bad = bad.model_copy(update={"id": f"hv-broken-{broken}"})
    code, report, output = validate(tmp_path, capsys, served(broken, [tiny["tiny-sqlite"], bad]))

    assert code == 1, output
    assert report["n"] == 2 and report["passed"] == 1
    assert [(f["task_id"], f["check"]) for f in report["failed"]] == [(bad.id, broken)]
    (failure,) = report["failed"]
    assert "reward_breakdown" in failure and failure["reason"]
    assert f"FAIL {bad.id} [{broken}]" in output
    row = next(r for r in report["tasks"] if r["task_id"] == bad.id)
    assert row["status"] == "fail" and set(row["reward_breakdown"]) == {"oracle", "null", "repeat"}
    if broken == "oracle":
        assert row["oracle"] == 0.0 and "not 1.0" in failure["reason"]
        assert failure["reward_breakdown"]["detail"] is not None
    if broken == "null":
        assert row["null"] == 1.0
    if broken == "repeat":
        assert (row["oracle"], row["repeat"]) == (1.0, 0.5)
    if broken == "leak":
        assert str(SECRET_TOTAL) in failure["reason"] and "list_files" in failure["reason"]
        assert (row["oracle"], row["null"], row["repeat"]) == (1.0, 0.0, 1.0)


def test_validate_against_a_running_server(tmp_path, capsys, app, tiny_dataset, served):
    """``--url``: the served tiny set's unsound tasks fail exactly as built."""
    spec = served("tiny", tiny_dataset.tasks)
    with BackgroundServer(app) as url:
        code, report, output = validate(tmp_path, capsys, spec, "--url", url)
    assert code == 1
    failed = {(f["task_id"], f["check"]) for f in report["failed"]}
    assert failed == {
        ("tiny-bad-setup", "oracle"),  # setup exits 3
        ("tiny-reward-file", "oracle"),  # reward.txt says 0.25
        ("tiny-reward-file", "null"),
        ("tiny-verify-hooks", "oracle"),  # out.txt is never written: 2/3
        ("tiny-verify-hooks", "null"),  # setup_marker.txt exists: 1/3 for nothing
    }
    assert report["passed"] == 3


def test_bad_arguments_are_clear_errors(capsys):
    assert cli.main(["validate", "--dataset", "nope:somewhere"]) == 2
    assert "unknown dataset format 'nope'" in capsys.readouterr().err
    assert cli.main(["validate", "--dataset", "starter", "--concurrency", "0"]) == 2
    assert "--concurrency must be at least 1" in capsys.readouterr().err


def test_the_old_positional_dataset_still_works_with_a_note(capsys):
    """``validate NAME`` was the one command without ``--dataset``; scripts written that way
    keep running (the argument is read) and are told the new spelling once."""
    assert cli.main(["validate", "starter", "--concurrency", "0"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "analyst-env: note: 'validate starter' is deprecated; write 'validate --dataset starter'",
        "analyst-env: error: --concurrency must be at least 1, got 0",
    ]
    assert cli.main(["validate", "starter", "--dataset", "procedural:7"]) == 2
    assert "two datasets given" in capsys.readouterr().err


def test_the_shipped_starter_set_validates(tmp_path, capsys):
    code, report, output = validate(tmp_path, capsys, "starter", "--concurrency", "8")
    assert code == 0, output
    assert report["n"] >= 100 and report["passed"] == report["n"]
    assert report["failed"] == [] and report["broken_upstream"] == []
    assert sum(r["gold_values_checked"] > 0 for r in report["tasks"]) > report["n"] / 2
    scorers = report["scorers"]
    assert {"numeric", "exact", "set", "list", "dabench", "workbook_match"} <= set(scorers)
    assert sum(row["tasks"] for row in scorers.values()) == report["n"]
    for name, row in scorers.items():
        assert row["adversarial_tried"] >= 3 * row["tasks"] > 0, name
        assert row["adversarial_scored_0"] == row["adversarial_tried"], name
        assert row["natural_scored_1"] == row["natural_tried"], name
    assert scorers["numeric"]["natural_tried"] > scorers["numeric"]["tasks"]
    tried = scorers["numeric"]["adversarial_tried"]
    assert (
        f"numeric: {scorers['numeric']['tasks']} task(s), {tried} adversarial answers "
        "tried, every one scored 0" in output
    )


def _contains_gold(submitted: str, gold) -> float:
    """A scorer a policy games: any answer that mentions the gold."""
    return 1.0 if str(gold).lower() in submitted.lower() else 0.0


def test_a_scorer_that_accepts_hedges_fails_the_adversarial_check(
    tmp_path, capsys, tiny, served, monkeypatch
):
    monkeypatch.setitem(scorers.SCORERS, "exact", _contains_gold)
    task = Task(
        id="hv-hedge",
        instruction="Which region sold most? Answer with its name.",
        answer="Westfold",
        oracle_answer="Westfold",
        verifier=VerifierSpec(name="exact"),
    )
    code, report, output = validate(tmp_path, capsys, served("hedge", [task]))
    assert code == 1, output
    (failure,) = report["failed"]
    assert (
        failure["check"] == "adversarial"
        and "or" in failure["reason"]
        and "pair" in failure["reason"]
    )
    assert (report["tasks"][0]["oracle"], report["tasks"][0]["null"]) == (
        1.0,
        0.0,
    )  # only the probes see it
    row = report["scorers"]["exact"]
    assert 0 < row["adversarial_scored_0"] < row["adversarial_tried"]
    assert "scored above 0" in output and "FAIL hv-hedge [adversarial]" in output


# ── gold values: what counts, and how they are matched ─────────────────────────
def test_gold_values_are_printed_as_the_task_prints_them():
    task = Task(
        id="t",
        instruction="q",
        answer=[["mean", "34.650"], ["n", 20.0]],
        oracle_answer="@mean[34.65] @n[20]",
        verifier=VerifierSpec(name="dabench"),
    )
    assert {"34.650", "34.65", "20.0", "20", "@mean[34.65] @n[20]"} <= gold_values(task)


def test_trivial_and_public_values_are_not_looked_for(tiny):
    task = Task(
        id="t-yes",
        instruction="Is the total 3 or 104 (answer yes/no)?",
        files=dict(tiny["tiny-csv"].files),
        answer=["yes", 1.0, 104, "amount", "ab"],
        oracle_answer="yes",
        verifier=VerifierSpec(name="exact"),
    )
    # "yes" is common, 1.0 trivial, 104 in the instruction, "amount" a column in the preview, "ab"
    # too short.
    assert leak_patterns(task) == {}


def test_keys_are_vocabulary_except_in_tool_data():
    patterns = {"ROUGE-L": value_pattern("ROUGE-L"), "7319.25": value_pattern("7319.25")}
    frame = {
        "done": True,
        "observation": {"metadata": {"reward_breakdown": {"components": {"ROUGE-L": 0.0}}}},
    }
    assert find_leak(patterns, frame) is None
    frame["observation"]["result"] = {"structured_content": {"totals": {"7319.25": 1}}}
    assert (
        find_leak(patterns, frame)
        == "'7319.25' at observation.result.structured_content.totals.7319.25"
    )
    assert find_leak(patterns, {"detail": "expected rouge-l of 1"}) == "'ROUGE-L' at detail"


def test_values_match_whole_tokens_only():
    p = value_pattern("119")
    assert p.search("count: 119 rows") and p.search("[119]") and p.search("119.txt")
    assert (
        not p.search("1190")
        and not p.search("0.119")
        and not p.search("119.5")
        and not p.search("a119")
    )
    s = value_pattern("Office Supplies")
    assert s.search("top: office supplies.") and not s.search("Office Suppliesx")


# ── text every task shares: tool catalogue and trainer prompts ─────────────────
def _catalogue() -> list[dict]:
    from analyst_env.server.tools import TOOLS, _spec_of

    return [_spec_of(tool).model_dump() for tool in TOOLS.values()]


def test_no_served_gold_is_in_the_tool_catalogue_or_the_prompts():
    """The catalogue and prompts reach every episode: one task's answer there scores for free."""
    from analyst_env.datasets.starter_set import load_starter
    from analyst_env.evaluation.gold_leaks import prompt_frame

    catalogue = _catalogue()
    shared = {"catalogue": catalogue, **prompt_frame(catalogue)}
    tasks = list(load_starter().tasks)
    dabench = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "dabench"
    if dabench.exists():
        tasks += list(registry.load_dataset(f"dabench:{dabench}").tasks)
    found = {task.id: where for task in tasks if (where := find_leak(leak_patterns(task), shared))}
    assert found == {}


def test_a_gold_written_into_shared_text_is_a_leak():
    from analyst_env.evaluation.gold_leaks import scan_runs

    task = Task(
        id="t-fare",
        instruction="What is the mean fare?",
        answer=[["mean_fare", "34.65"]],
        oracle_answer="@mean_fare[34.65]",
        verifier=VerifierSpec(name="dabench"),
    )
    catalogue = _catalogue()
    catalogue[0]["description"] += " (for example `@mean_fare[34.65]`)"
    frames = {
        "null": [("reset", {"observation": {"available_tools": catalogue}})],
        "oracle": [],
        "repeat": [],
    }
    where, checked = scan_runs(task, frames)
    assert checked >= 1 and where is not None and "34.65" in where


# ── quarantine: upstream tasks their initial state already solves ──────────────
def test_an_upstream_task_solved_by_its_initial_state_is_quarantined(
    tmp_path, capsys, tiny, served
):
    csv = tiny["tiny-csv"]
    # The hook passes on the untouched files: the null run earns 1.0 without doing anything.
    solved = csv.model_copy(
        update={
            "id": "hv-solved-upstream",
            "verify": ["test -f sales.csv"],
            "metadata": {"source": "somebench", "gold_status": "ok"},
        }
    )
    ours = solved.model_copy(update={"id": "hv-solved-ours", "metadata": {"source": "ours"}})
    code, report, output = validate(tmp_path, capsys, served("solved", [csv, solved, ours]))
    assert code == 1, output  # our own task is ours to fix: it fails the null check
    assert [(f["task_id"], f["check"]) for f in report["failed"]] == [("hv-solved-ours", "null")]
    (quarantined,) = report["broken_upstream"]
    assert quarantined["task_id"] == "hv-solved-upstream"
    assert quarantined["gold_status"] == "solved by its initial state: the null run scored 1"
    assert report["quarantine"] == {"solved by its initial state": 1}
    assert "quarantined: solved by its initial state 1" in output
