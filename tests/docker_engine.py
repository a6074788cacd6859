"""A Docker engine for the tests that run the published image (a pytest plugin of conftest.py).

``engine`` starts one with deploy/image/engine.sh if none answers (it needs root and
Debian's docker.io; .ci/image starts one in CI) and skips, with the reason, when none
can be had. ``image`` is the server image under test: $ANALYST_ENV_IMAGE, or built from
this tree's Dockerfile by deploy/image/build.sh. ``docker`` runs the client; ``Container``
is one `docker run -d` of the image as the image tests start it.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
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


def free_port() -> int:
    """A TCP port nothing listens on now, for publishing a container's 8000 on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Container:
    """One `docker run -d` of the server image, with its port published on 127.0.0.1.

    ``token`` goes into the environment as ``ANALYST_ENV_TOKEN`` (as a hub Space passes
    a secret); ``options`` are the `docker run` options under test. ``remove()`` also
    removes its anonymous volumes (the Dockerfile declares the state directory a volume,
    so every run makes one).
    """

    def __init__(self, image: str, options: list[str], token: str, prefix: str = "probe") -> None:
        self.port = free_port()
        self.name = f"analyst-env-{prefix}-{os.getpid()}-{self.port}"
        docker(
            "run",
            "-d",
            "--name",
            self.name,
            "-e",
            f"ANALYST_ENV_TOKEN={token}",
            "-p",
            f"127.0.0.1:{self.port}:8000",
            *options,
            image,
        )
        self.url = f"http://127.0.0.1:{self.port}"

    def inspect(self) -> dict:
        return json.loads(docker("inspect", self.name).stdout)[0]

    def running(self) -> bool:
        info = self.inspect()
        return info["State"]["Running"] and info["RestartCount"] == 0

    def exec(self, *argv: str, user: str | None = None) -> subprocess.CompletedProcess:
        """Run ``argv`` in the container, as the image's user unless ``user`` is given."""
        as_user = ["-u", user] if user else []
        return docker("exec", *as_user, self.name, *argv, check=False)

    def exists(self, path: str) -> bool:
        return self.exec("test", "-e", path).returncode == 0

    def logs(self, tail: int = 60) -> str:
        done = docker("logs", "--tail", str(tail), self.name, check=False)
        return done.stdout + done.stderr

    def remove(self) -> None:
        docker("rm", "-f", "-v", self.name, check=False)
