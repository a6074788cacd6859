"""Harbor export: every exported task's grader gives the oracle 1.0 and an empty answer 0.0.

The scripts run outside Docker: ``HARBOR_*`` variables point their container
paths at temporary directories and at this virtual environment's Python, so
``tests/test.sh`` runs the same grader entry point it runs in the image.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib

import pytest

from analyst_env.cli import main as cli_main
from analyst_env.datasets import load_dataset
from analyst_env.server.harbor_grader import grade
from analyst_env.trainers.harbor_export import export

SCORED_TINY = [
    "tiny-csv",
    "tiny-sqlite",
    "tiny-excel",
]  # scorer tasks; the hook tasks are tested below


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The grader wheel, built once; these tests run test.sh with this venv's grader
    (HARBOR_NO_INSTALL)."""
    from analyst_env.trainers.harbor_export import build_grader_wheel

    return build_grader_wheel(tmp_path_factory.mktemp("wheel"))


def run_task(task_dir, tmp_path, answer: str | None) -> float:
    """Build the task's input dir like the image does, optionally run the solution, then grade."""
    work = tmp_path / "run"
    shutil.rmtree(work, ignore_errors=True)
    inp, wd, logs = work / "input", work / "workdir", work / "logs"
    shutil.copytree(task_dir / "environment" / "data", inp)
    wd.mkdir(parents=True)
    for line in (task_dir / "environment" / "Dockerfile").read_text().splitlines():
        if line.startswith("RUN cd /home/user/input && "):
            subprocess.run(
                line.removeprefix("RUN cd /home/user/input && "), shell=True, cwd=inp, check=True
            )
    env = {
        **os.environ,
        "HARBOR_INPUT": str(inp),
        "HARBOR_WORKDIR": str(wd),
        "HARBOR_TESTS": str(task_dir / "tests"),
        "HARBOR_LOGS": str(logs),
        "HARBOR_PYTHON": sys.executable,
        "HARBOR_NO_INSTALL": "1",
    }
    if answer is None:
        subprocess.run(
            ["sh", str(task_dir / "solution" / "solve.sh")], env=env, check=True, timeout=120
        )
    else:
        (wd / "answer.txt").write_text(answer)
    (logs).mkdir(exist_ok=True)
    (logs / "reward.txt").write_text(
        "1.0"
    )  # a stale reward the agent may have left must not survive
    subprocess.run(["sh", str(task_dir / "tests" / "test.sh")], env=env, check=True, timeout=120)
    return float((logs / "reward.txt").read_text())


def test_tiny_tasks_export_with_the_harbor_layout(tiny_dataset, tmp_path, wheel):
    dirs = export(tiny_dataset.tasks, tmp_path / "out", grader_requirement=wheel)
    assert [d.name for d in dirs] == [t.id for t in tiny_dataset.tasks]
    csv = tmp_path / "out" / "tasks" / "tiny-csv"
    for rel in (
        "instruction.md",
        "task.toml",
        "environment/Dockerfile",
        "environment/data/sales.csv",
        "tests/test.sh",
        "tests/task.json",
        "solution/solve.sh",
    ):
        assert (csv / rel).is_file(), rel
    config = tomllib.loads((csv / "task.toml").read_text())
    assert (
        config["task"]["name"] == "analyst-env/tiny-csv"
        and config["metadata"]["gold_answer"] == "7319.25"
    )
    assert config["environment"]["allow_internet"] is False
    instruction = (csv / "instruction.md").read_text()
    assert "/home/user/input" in instruction and "/workdir/answer.txt" in instruction
    assert (
        "7319.25" not in instruction
    )  # the gold answer only lives in tests/ and task.toml metadata
    dockerfile = (csv / "environment" / "Dockerfile").read_text()
    assert "COPY data/ /home/user/input/" in dockerfile
    # The grader and the gold reach the container with tests/, at verification time only.
    assert (
        "analyst-env" not in dockerfile
        and "tests" not in dockerfile
        and "7319.25" not in dockerfile
    )
    assert (csv / "tests" / "grader" / wheel.name).is_file()


@pytest.mark.parametrize("task_id", SCORED_TINY)
def test_tiny_grader_scores_the_solution_1_and_an_empty_answer_0(
    tiny_dataset, tmp_path, task_id, wheel
):
    task = tiny_dataset.by_id()[task_id]
    (task_dir,) = export([task], tmp_path / "out", grader_requirement=wheel)
    assert run_task(task_dir, tmp_path, None) == 1.0
    assert run_task(task_dir, tmp_path, "") == 0.0
    assert run_task(task_dir, tmp_path, "12345") == 0.0


def test_verify_hook_tasks_are_graded_by_the_same_hook_rule_as_the_server(
    tiny_dataset, tmp_path, wheel
):
    by_id = tiny_dataset.by_id()
    (hooks,) = export([by_id["tiny-verify-hooks"]], tmp_path / "a", grader_requirement=wheel)
    # setup ran (marker), answer is "done", but out.txt was never written: 2 of 3 hooks pass.
    assert run_task(hooks, tmp_path, None) == pytest.approx(2 / 3)
    (reward_file,) = export([by_id["tiny-reward-file"]], tmp_path / "b", grader_requirement=wheel)
    assert (
        run_task(reward_file, tmp_path, "x") == 0.25
    )  # reward.txt written by a hook wins, as on the server


def test_a_sample_of_starter_through_the_cli(tmp_path, wheel):
    starter = load_dataset("starter")
    by_template: dict[str, object] = {}
    for task in starter.tasks:  # one task per template: every scorer and oracle shape, quickly
        by_template.setdefault(task.metadata.get("template", task.id), task)
    with_steps = [t for t in by_template.values() if t.oracle_steps][:2]
    sample = (
        with_steps + [t for t in by_template.values() if not t.oracle_steps][: 6 - len(with_steps)]
    )
    assert (
        cli_main(
            [
                "export",
                "harbor",
                "--dataset",
                "starter",
                "--out",
                str(tmp_path / "all"),
                "--limit",
                "3",
            ]
        )
        == 0
    )
    assert len(list((tmp_path / "all" / "tasks").iterdir())) == 3
    assert any(
        t.verifier.name == "workbook_match" for t in with_steps
    )  # scored from a written workbook
    for task, task_dir in zip(
        sample, export(sample, tmp_path / "sample", grader_requirement=wheel)
    ):
        answer = json.loads((task_dir / "tests" / "task.json").read_text())["answer"]
        for ref in answer.get("references", []) if isinstance(answer, dict) else []:
            assert (
                ref["path"] == "reference-1.xlsx" and (task_dir / "tests" / ref["path"]).is_file()
            )  # bundled
        recalculates = (
            "libreoffice-calc-nogui" in (task_dir / "environment" / "Dockerfile").read_text()
        )
        assert recalculates == (task.verifier.name == "workbook_match"), (
            "only workbook tasks need LibreOffice"
        )
        assert run_task(task_dir, tmp_path, None) == 1.0, task_dir.name
        # The empty answer through the same grader function, in-process (a subprocess each is slow),
        # on untouched input files (the oracle's run may have written a workbook there).
        work = tmp_path / "run"
        shutil.rmtree(work / "input")
        shutil.copytree(task_dir / "environment" / "data", work / "input")
        assert (
            grade(
                task_dir / "tests" / "task.json", work / "input", work / "workdir" / "missing.txt"
            )
            == 0.0
        )


def test_a_missing_grader_wheel_is_a_clear_cli_error(tmp_path, capsys):
    args = ["export", "harbor", "--dataset", "starter", "--out", str(tmp_path), "--limit", "1"]
    assert cli_main([*args, "--grader-requirement", str(tmp_path / "nope.whl")]) == 2
    err = capsys.readouterr().err
    assert "nope.whl" in err and "no such file" in err


def test_unknown_dataset_is_a_clear_cli_error(tmp_path, capsys):
    assert cli_main(["export", "harbor", "--dataset", "nope:x", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "unknown dataset format 'nope'" in err and len(err.strip().splitlines()) == 1


def _copy_sources(dockerfile: str) -> list[str]:
    return [
        line.split()[1] for line in dockerfile.splitlines() if line.startswith(("COPY ", "ADD "))
    ]


def test_base_image_and_wheelhouse_keep_the_build_inside_its_context(tmp_path, capsys, wheel):
    house = tmp_path / "house"
    house.mkdir()
    shutil.copyfile(wheel, house / wheel.name)
    args = [
        "export",
        "harbor",
        "--dataset",
        "starter",
        "--out",
        str(tmp_path / "out"),
        "--limit",
        "1",
        "--grader-requirement",
        str(wheel),
        "--base-image",
        "analyst-env-base:bookworm-py3.11",
    ]
    assert cli_main([*args, "--wheelhouse", str(house)]) == 0
    (task_dir,) = (tmp_path / "out" / "tasks").iterdir()
    environment = task_dir / "environment"
    dockerfile = (environment / "Dockerfile").read_text()
    assert dockerfile.startswith("FROM analyst-env-base:bookworm-py3.11\n")
    assert (
        "--no-index --find-links /tmp/wheels" in dockerfile
        and (environment / "wheels" / wheel.name).is_file()
    )
    for source in _copy_sources(dockerfile):  # nothing from the host but the build context
        assert (environment / source).exists() and not os.path.isabs(source), source
    assert str(tmp_path) not in dockerfile and str(wheel) not in dockerfile
    # Without the options: Harbor's usual base, packages from the index, still nothing from outside.
    assert (
        cli_main(
            [
                "export",
                "harbor",
                "--dataset",
                "starter",
                "--out",
                str(tmp_path / "plain"),
                "--limit",
                "1",
                "--grader-requirement",
                str(wheel),
            ]
        )
        == 0
    )
    (plain,) = (tmp_path / "plain" / "tasks").iterdir()
    text = (plain / "environment" / "Dockerfile").read_text()
    assert text.startswith("FROM python:3.11-slim\n") and "--no-index" not in text
    assert _copy_sources(text) == ["data/"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli_main([*args, "--wheelhouse", str(empty)]) == 2
    assert "holds no *.whl files" in capsys.readouterr().err


def test_procedural_workbook_tasks_export_with_their_reference(tmp_path, wheel):
    """A generated result-workbook and Excel-edit task: the reference travels in tests/ only,
    the oracle's cell (replayed by solve.sh) scores 1 and an untouched workbook 0."""
    from analyst_env.datasets.procedural import ProceduralDataset

    ds = ProceduralDataset(4242, cache_dir=tmp_path / "cache")
    picked: dict[str, object] = {}
    for index in range(400):
        task = ds.task("train", index)
        if task.metadata["category"] in ("result-workbook", "excel-edit"):
            picked.setdefault(task.metadata["category"], task)
        if len(picked) == 2:
            break
    assert set(picked) == {"result-workbook", "excel-edit"}
    tasks = list(picked.values())
    for task_dir in export(tasks, tmp_path / "out", grader_requirement=wheel):
        (ref,) = json.loads((task_dir / "tests" / "task.json").read_text())["answer"]["references"]
        assert ref["path"] == "reference-1.xlsx" and (task_dir / "tests" / ref["path"]).is_file()
        shipped = {p.name for p in (task_dir / "environment").rglob("*") if p.is_file()}
        assert "reference-1.xlsx" not in shipped and "reference.xlsx" not in shipped
        assert run_task(task_dir, tmp_path, None) == 1.0, task_dir.name
        assert run_task(task_dir, tmp_path, "done") == 0.0, task_dir.name
