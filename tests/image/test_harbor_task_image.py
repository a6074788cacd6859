"""An exported Harbor task, built with Docker and graded in its container: oracle 1, no answer 0.

The task is exported with ``--base-image`` set to the local stand-in for
python:3.11-slim (deploy/image/base.sh; Docker Hub is out of reach), its
``environment/`` is built with ``docker build`` as Harbor builds it, and
``tests/`` and ``solution/`` reach the container only when it runs (mounted, as
Harbor copies them in at verification time). The container runs without a
network: the grader installs from the wheel in ``tests/grader/``. The image
must not hold the grader or the gold.

Skipped, with the reason, when no Docker engine answers and none can be started
(the engine fixture of tests/docker_engine.py; .ci/image starts one in CI).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from docker_engine import REPO

from analyst_env.datasets import load_dataset
from analyst_env.trainers.harbor_export import export

pytestmark = [pytest.mark.live, pytest.mark.timeout(2400)]  # the first build installs from PyPI
IMAGE = "analyst-env-harbor-task:test"


def _docker(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def base(engine) -> str:
    made = subprocess.run(
        [str(REPO / "deploy/image/base.sh")], capture_output=True, text=True, timeout=1800
    )
    if made.returncode != 0:
        pytest.skip(f"no local base image could be made: {made.stderr.strip()[-500:]}")
    return made.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def task_dir(base, tmp_path_factory) -> Path:
    task = next(
        t for t in load_dataset("starter").tasks if t.verifier.name == "numeric" and t.files
    )
    (root,) = export([task], tmp_path_factory.mktemp("harbor-image"), base_image=base)
    dockerfile = (root / "environment" / "Dockerfile").read_text()
    assert dockerfile.startswith(f"FROM {base}\n")
    built = _docker(
        "build", "--network", "host", "-t", IMAGE, str(root / "environment"), timeout=1800
    )
    assert built.returncode == 0, built.stderr[-3000:]
    return root


def _run(task_dir: Path, script: str) -> subprocess.CompletedProcess:
    mounts = [
        "-v",
        f"{task_dir / 'tests'}:/tests:ro",
        "-v",
        f"{task_dir / 'solution'}:/solution:ro",
    ]
    return _docker(
        "run", "--rm", "--network", "none", *mounts, IMAGE, "sh", "-c", script, timeout=600
    )


def test_the_oracle_scores_1_in_the_built_image(task_dir):
    ran = _run(
        task_dir, "sh /solution/solve.sh && sh /tests/test.sh && cat /logs/verifier/reward.txt"
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert float(ran.stdout.strip().splitlines()[-1]) == 1.0


def test_no_answer_scores_0_in_the_built_image(task_dir):
    ran = _run(task_dir, "sh /tests/test.sh && cat /logs/verifier/reward.txt")
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert float(ran.stdout.strip().splitlines()[-1]) == 0.0


def test_the_image_holds_neither_the_grader_nor_the_gold(task_dir):
    gold = json.loads((task_dir / "tests" / "task.json").read_text())["oracle_answer"]
    script = (
        "python -I -c 'import analyst_env' 2>/dev/null && echo GRADER; ls /; "
        f"grep -rlF {json.dumps(gold)} /home/user/input /workdir /logs | sed 's/^/HOLDS /'; true"
    )
    ran = _docker("run", "--rm", "--network", "none", IMAGE, "sh", "-c", script)
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.split()
    assert "GRADER" not in lines and "tests" not in lines and "solution" not in lines
    assert "HOLDS" not in lines, ran.stdout
