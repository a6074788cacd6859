"""An exported task's tests/test.sh installs its grader from tests/ and grades, in a fresh venv.

Harbor copies ``tests/`` into the container only when verification starts; the
image has the grader's public dependencies but not the grader. This runs
``test.sh`` the same way in a virtual environment that has the dependencies
(this venv's site-packages, without its editable ``analyst_env``) and no
grader: the oracle's answer must score 1.0 and no answer 0.0.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from analyst_env.datasets import load_dataset
from analyst_env.trainers.harbor_export import build_grader_wheel, export


@pytest.fixture(scope="module")
def grader_venv(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("grader-venv")
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True, timeout=300)
    python = root / "venv" / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # The dependencies, as the image's pip install provides them; a plain path line does not run
    # the editable install's finder, so analyst_env itself is not importable yet.
    (Path(site) / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    probe = subprocess.run([python, "-I", "-c", "import analyst_env"], capture_output=True)
    assert probe.returncode != 0, "the venv must not see the grader before test.sh installs it"
    return python


def _grade(task_dir: Path, work: Path, python: Path, answer: str | None) -> float:
    shutil.rmtree(work, ignore_errors=True)
    inp, wd, logs = work / "input", work / "workdir", work / "logs"
    shutil.copytree(task_dir / "environment" / "data", inp)
    wd.mkdir(parents=True)
    tests = work / "tests"  # copied in at verification time, as Harbor does
    shutil.copytree(task_dir / "tests", tests)
    env = {
        **os.environ,
        "HARBOR_INPUT": str(inp),
        "HARBOR_WORKDIR": str(wd),
        "HARBOR_TESTS": str(tests),
        "HARBOR_LOGS": str(logs),
        "HARBOR_PYTHON": str(python),
    }
    env.pop("PYTHONPATH", None)
    if answer is None:
        subprocess.run(
            ["sh", str(task_dir / "solution" / "solve.sh")], env=env, check=True, timeout=300
        )
    else:
        (wd / "answer.txt").write_text(answer)
    subprocess.run(["sh", str(tests / "test.sh")], env=env, check=True, timeout=600)
    return float((logs / "reward.txt").read_text())


def test_csv_and_workbook_tasks_grade_from_the_bundled_wheel(grader_venv, tmp_path):
    starter = load_dataset("starter")
    csv = next(
        t for t in starter.tasks if t.metadata.get("kind") == "csv" and t.verifier.name == "numeric"
    )
    workbook = next(t for t in starter.tasks if t.verifier.name == "workbook_match")
    wheel = build_grader_wheel(tmp_path / "wheel")
    for task, task_dir in zip(
        (csv, workbook), export([csv, workbook], tmp_path / "out", grader_requirement=wheel)
    ):
        assert (task_dir / "tests" / "grader" / wheel.name).is_file()
        assert _grade(task_dir, tmp_path / "run", grader_venv, None) == 1.0, task.id
        assert _grade(task_dir, tmp_path / "run", grader_venv, "") == 0.0, task.id
