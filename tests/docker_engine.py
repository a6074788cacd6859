"""A Docker engine for the tests that run the published image (a pytest plugin of conftest.py).

``engine`` starts one with deploy/image/engine.sh if none answers (it needs root and
Debian's docker.io; .ci/image starts one in CI) and skips, with the reason, when none
can be had. ``image`` is the server image under test: $ANALYST_ENV_IMAGE, or built from
this tree's Dockerfile by deploy/image/build.sh. ``docker`` runs the client.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def docker(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    """``docker ARGS`` with its output captured as text; ``check`` raises on a non-zero exit."""
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, check=check, timeout=timeout
    )


@pytest.fixture(scope="session")
def engine():
    """A Docker engine that answers (started by deploy/image/engine.sh if need be), or a skip."""
    if shutil.which("docker") is None:
        pytest.skip("no docker client (apt-get install docker.io)")
    started = subprocess.run(
        [str(REPO / "deploy/image/engine.sh")], capture_output=True, text=True, timeout=120
    )
    if started.returncode != 0:
        pytest.skip(
            f"no Docker engine answers and none could be started: {started.stderr.strip()[-500:]}"
        )
    with pytest.MonkeyPatch.context() as mp:
        if started.stdout.strip():
            mp.setenv("DOCKER_HOST", started.stdout.strip())
        yield


@pytest.fixture(scope="session")
def image(engine) -> str:
    """The image under test: $ANALYST_ENV_IMAGE, or built now from this tree's Dockerfile."""
    if os.environ.get("ANALYST_ENV_IMAGE"):
        return os.environ["ANALYST_ENV_IMAGE"]
    built = subprocess.run(
        [str(REPO / "deploy/image/build.sh")], capture_output=True, text=True, timeout=1800
    )
    assert built.returncode == 0, built.stderr[-3000:]
    return dict(line.split("=", 1) for line in built.stdout.splitlines() if "=" in line)["IMAGE"]
