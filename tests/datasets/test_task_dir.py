"""``analyst-env generate`` writes a portable task directory; ``tasks:DIR`` loads and serves it; bad
directories are refused with the line that is wrong."""

import asyncio
import json
import shutil

import pytest

from analyst_env.cli import main
from analyst_env.datasets.procedural import ProceduralDataset
from analyst_env.datasets.procedural.sampling import fingerprint
from analyst_env.datasets.procedural.taskdir import TaskDirError, load_task_dir
from analyst_env.datasets.registry import load_dataset
from analyst_env.evaluation.engine import evaluate
from analyst_env.server.app import build_app
from analyst_env.server.local_server import BackgroundServer
from analyst_env.server.runtime import Runtime
from analyst_env.server.settings import Settings


@pytest.fixture(scope="module")
def frozen(tmp_path_factory):
    root = tmp_path_factory.mktemp("frozen")
    assert (
        main(
            [
                "generate",
                "--count",
                "6",
                "--seed",
                "31337",
                "--split",
                "test",
                "--start",
                "50",
                "--out",
                str(root / "set"),
            ]
        )
        == 0
    )
    return root / "set"


def test_generate_writes_the_same_tasks_the_server_would_make(frozen, tmp_path):
    ds = load_dataset(f"tasks:{frozen}")
    assert [t.id for t in ds.tasks] == [f"procedural-test-{i}" for i in range(50, 56)]
    live = ProceduralDataset(31337, cache_dir=tmp_path)
    for t in ds.tasks:
        assert fingerprint(t) == fingerprint(live.task_by_id(t.id))
    meta = json.loads((frozen / "dataset.json").read_text())
    assert meta["format"] == "analyst_env-tasks/1" and "31337" not in json.dumps(meta)
    assert meta["generation"]["kept"] == 6


def test_a_frozen_set_is_served_and_scored(frozen):
    ds = load_task_dir(str(frozen))
    runtime = Runtime(Settings(max_sessions=8), datasets=[ds])
    try:
        with BackgroundServer(build_app(runtime.settings, runtime=runtime)) as url:
            oracle = asyncio.run(evaluate(url, ds.tasks, "oracle", concurrency=3))
            null = asyncio.run(evaluate(url, ds.tasks, "null", concurrency=3))
    finally:
        runtime.close()
    assert [r["reward"] for r in oracle] == [1.0] * 6
    assert [r["reward"] for r in null] == [0.0] * 6


def _broken(frozen, tmp_path, edit):
    copy = tmp_path / "copy"
    shutil.copytree(frozen, copy)
    lines = (copy / "tasks.jsonl").read_text().splitlines()
    lines[1] = edit(json.loads(lines[1]))
    (copy / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    return copy


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda r: "{not json", "invalid JSON"),
        (
            lambda r: json.dumps({k: v for k, v in r.items() if k != "oracle_answer"}),
            "oracle_answer",
        ),
        (lambda r: json.dumps(r | {"verifier": {"name": "vibes"}}), "unknown verifier"),
        (
            lambda r: json.dumps(r | {"files": {"x.csv": "../../etc/passwd"}}),
            "leaves the task directory",
        ),
        (lambda r: json.dumps(r | {"files": {"x.csv": "files/nope.csv"}}), "not found"),
    ],
)
def test_bad_lines_are_refused_with_their_line_number(frozen, tmp_path, edit, message):
    with pytest.raises(TaskDirError, match=f"tasks.jsonl:2: .*{message}"):
        load_task_dir(str(_broken(frozen, tmp_path, edit)))


def test_duplicate_ids_and_empty_directories_are_refused(frozen, tmp_path):
    first = json.loads((frozen / "tasks.jsonl").read_text().splitlines()[0])
    copy = _broken(frozen, tmp_path, lambda r: json.dumps(r | {"id": first["id"]}))
    with pytest.raises(TaskDirError, match="duplicate task id"):
        load_task_dir(str(copy))
    with pytest.raises(TaskDirError, match="holds no tasks.jsonl"):
        load_task_dir(str(tmp_path))


def test_generate_refuses_a_used_directory_and_bad_counts(frozen, capsys):
    assert main(["generate", "--count", "1", "--seed", "1", "--out", str(frozen)]) == 2
    assert main(["generate", "--count", "0", "--seed", "1", "--out", str(frozen / "x")]) == 2
    assert "error" in capsys.readouterr().err


def test_commands_that_need_a_finite_list_refuse_an_unbounded_set(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("ANALYST_ENV_CACHE", str(tmp_path))
    assert main(["eval", "--dataset", "procedural:1", "--policy", "null"]) == 2
    assert (
        main(["export", "harbor", "--dataset", "procedural:1", "--out", str(tmp_path / "h")]) == 2
    )
    assert "unbounded" in capsys.readouterr().err


def test_generate_shows_progress_and_ends_with_one_line_or_json(tmp_path, capsys):
    args = ["generate", "--count", "3", "--seed", "5", "--split", "test"]
    assert main([*args, "--out", str(tmp_path / "text")]) == 0
    out, err = capsys.readouterr()
    assert out.count("\n") == 1 and out.startswith("wrote 3 tasks to ")
    assert "3/3" in err  # the progress bar reached the end on stderr

    assert main([*args, "--out", str(tmp_path / "json"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["tasks"] == 3 and summary["wrote"] == str(tmp_path / "json")
    assert summary["p99_ms"] == round(summary["p99_ms"], 1) and summary["dropped"] >= 0
