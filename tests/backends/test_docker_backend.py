"""The Docker backend: Dockerfile and container options from a recipe, the attach stream, the
engine.

The tests that need an engine are opt-in: set ``ANALYST_ENV_TEST_DOCKER=1`` on a host
with an engine that can pull (or already has) ``python:3.11-slim-bookworm``
(``ANALYST_ENV_TEST_DOCKER_BUILD_NETWORK=host`` for an engine without a bridge). CI
turns them on (``.ci/run``), on the engine ``.ci/image`` starts, with its debootstrapped
stand-in base tagged as that image. Everything else runs everywhere.
"""

from __future__ import annotations

import io
import os
import struct
import subprocess
import sys
import tarfile
import time
from dataclasses import replace

import pytest

from analyst_env.envs.recipes.recipe import Recipe
from analyst_env.envs.remote.bounded import BackendUnavailable
from analyst_env.envs.remote.channel import StderrTail
from analyst_env.envs.remote.docker_backend import DockerSandboxBackend, demultiplex, run_options
from analyst_env.envs.remote.dockerfile import build_context, dockerfile
from analyst_env.envs.remote.options import Sizing, WarmPool
from analyst_env.envs.remote.runner_image import resolve_default, runner_command

docker = pytest.importorskip("docker", reason="the docker extra is not installed")
LIVE = os.environ.get("ANALYST_ENV_TEST_DOCKER") == "1"
live = pytest.mark.skipif(
    not LIVE, reason="needs a Docker engine: set ANALYST_ENV_TEST_DOCKER=1 to run"
)


def test_dockerfile_from_a_full_recipe():
    recipe = Recipe(
        name="etl",
        base_image="python:3.11-slim-bookworm",
        apt=["libpq5", "curl=7.88.1-10"],
        pip=["psycopg[binary]==3.2.1", "pandas>=2,<3"],
        uv=["polars"],
        pip_index_url="https://pypi.internal/simple",
        uv_index_url="https://uv.internal/simple",
        npm=["@scope/tool@1.4.0"],
        npm_registry="https://npm.internal",
        apt_sources="deb https://mirror.internal/debian bookworm main",
        preload=["polars", "psycopg"],
    )
    text = dockerfile(recipe)
    lines = text.splitlines()
    assert lines[1] == "FROM python:3.11-slim-bookworm"
    assert (
        "RUN echo 'deb https://mirror.internal/debian bookworm main' > "
        "/etc/apt/sources.list.d/analyst-env.list" in lines
    )
    apt = next(line for line in lines if "apt-get install" in line)
    assert "libpq5 curl=7.88.1-10 nodejs npm" in apt and apt.endswith("rm -rf /var/lib/apt/lists/*")
    assert any("uv pip install --system --no-cache 'ipython>=8.20'" in line for line in lines)
    assert (
        "RUN uv pip install --system --no-cache --index-url https://pypi.internal/simple "
        "'psycopg[binary]==3.2.1' 'pandas<3,>=2'" in lines
    )
    assert (
        "RUN uv pip install --system --no-cache --index-url https://uv.internal/simple polars"
        in lines
    )
    assert (
        "RUN npm install -g --registry https://npm.internal @scope/tool@1.4.0 && npm cache "
        "clean --force" in lines
    )
    assert "USER 1000" in lines and "WORKDIR /work" in lines
    assert (
        lines[-1] == 'CMD ["python", "-u", "-m", "analyst_env.envs.remote.runner", "--workdir", '
        '"/work", "--preload", "polars,psycopg"]'
    )
    assert text.index("COPY analyst_env") > text.index("uv pip install"), (
        "package layers come before the code"
    )


def test_dockerfile_of_the_default_image_and_shared_index():
    text = dockerfile(resolve_default("default"))
    assert "apt-get" not in text and "npm" not in text
    assert '"--preload", "numpy,pandas,duckdb,matplotlib.pyplot,openpyxl,sqlite3"' in text
    same = Recipe(
        name="x",
        pip=["a"],
        uv=["b"],
        pip_index_url="https://i/simple",
        uv_index_url="https://i/simple",
    )
    assert "RUN uv pip install --system --no-cache --index-url https://i/simple a b" in dockerfile(
        same
    )


def test_build_context_holds_the_dockerfile_and_the_runner_code():
    recipe = Recipe(name="x", pip=["requests"])
    with tarfile.open(fileobj=build_context(recipe)) as tar:
        names = set(tar.getnames())
        assert tar.extractfile("Dockerfile").read().decode() == dockerfile(recipe)
    assert {
        "analyst_env/__init__.py",
        "analyst_env/envs/remote/runner.py",
        "analyst_env/envs/kernel/child.py",
    } <= names
    assert not any("__pycache__" in n for n in names)


def test_container_options_isolate_and_size_the_slot():
    recipe = Recipe(name="x", cpus=2, memory_mb=2048, disk_mb=512)
    options = run_options(
        recipe, Sizing(cpus=1, memory_mb=4096, disk_mb=1024), pids=128, runtime="runsc"
    )
    assert options["network_mode"] == "none" and options["read_only"] is True
    assert options["cap_drop"] == ["ALL"] and options["security_opt"] == ["no-new-privileges"]
    assert options["mem_limit"] == options["memswap_limit"] == "2048m"
    assert options["nano_cpus"] == 2_000_000_000 and options["pids_limit"] == 128
    assert options["tmpfs"]["/work"].startswith("size=512m,uid=1000")
    assert options["runtime"] == "runsc" and options["user"] == "1000:1000"
    assert options["auto_remove"] is True  # a runner that exits takes its container along
    assert (
        options["command"] == runner_command(recipe)
        and options["stdin_open"]
        and not options["tty"]
    )
    defaults = run_options(
        Recipe(name="y"), Sizing(cpus=1.5, memory_mb=4096, disk_mb=1024), pids=256, runtime=None
    )
    assert (
        defaults["mem_limit"] == "4096m"
        and defaults["nano_cpus"] == 1_500_000_000
        and "runtime" not in defaults
    )


def test_attach_stream_is_demultiplexed():
    def frame(stream: int, data: bytes) -> bytes:
        return struct.pack(">BxxxL", stream, len(data)) + data

    raw = io.BytesIO(
        frame(1, b"abc") + frame(2, b"warning: x\n") + frame(1, b"def") + frame(1, b"")
    )
    tail = StderrTail()
    chunks = list(demultiplex(lambda n: raw.read(min(n, 2)), tail))
    assert b"".join(chunks) == b"abcdef"
    assert tail.text() == "runner stderr: warning: x"
    truncated = io.BytesIO(frame(1, b"abc")[:-1])
    assert list(demultiplex(truncated.read, StderrTail())) == []


def test_unreachable_engine_is_a_clear_startup_error(tmp_path):
    with pytest.raises(BackendUnavailable, match="cannot reach the Docker engine at unix://"):
        DockerSandboxBackend(
            resolve_default,
            base_url=f"unix://{tmp_path}/no-docker.sock",
            timeouts=replace(DockerSandboxBackend.timeouts, connect_s=2),
        )


@live
def test_live_episode_in_a_container(csv_file):
    backend = DockerSandboxBackend(
        resolve_default,
        pool=WarmPool(warm=0),
        build_network=os.environ.get("ANALYST_ENV_TEST_DOCKER_BUILD_NETWORK"),
    )
    try:
        sandbox = backend.start("default", files={"sales.csv": csv_file}, seed=1)
        result = sandbox.run_cell(
            "import pandas as pd\npd.read_csv('sales.csv').amount.sum()", timeout_s=60
        )
        assert "16.0" in result.outputs[0]["text/plain"]
        net = sandbox.run_cell(
            "import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=2)", timeout_s=30
        )
        assert net.error is not None
        ro = sandbox.run_shell("touch /usr/x", timeout_s=10)
        assert ro.exit_code != 0
        assert sandbox.run_shell("id -u", timeout_s=10).stdout == "1000\n"
        hung = sandbox.run_cell("import time\nwhile True: time.sleep(0.05)", timeout_s=1)
        assert hung.timed_out and not hung.kernel_restarted
        sandbox.run_cell("leftover = 1", timeout_s=10)
        sandbox.close()
        again = backend.start("default", files={})  # the same container, a fresh kernel
        assert again.run_cell("'leftover' in dir()", timeout_s=30).outputs == [
            {"text/plain": "False"}
        ]
        assert again.run_shell("ls -A", timeout_s=10).stdout == ""
        again.close()
    finally:
        backend.close()


_HOLD_A_SLOT = """
import os, sys
from analyst_env.envs.remote.docker_backend import DockerSandboxBackend
from analyst_env.envs.remote.options import WarmPool
from analyst_env.envs.remote.runner_image import resolve_default
backend = DockerSandboxBackend(resolve_default, pool=WarmPool(warm=0), build_network=os.environ.get(
    "ANALYST_ENV_TEST_DOCKER_BUILD_NETWORK"))
sandbox = backend.start("default", files={})
print("ready", flush=True)
sys.stdin.read()
"""


@live
def test_a_server_killed_without_closing_its_backend_leaves_no_container():
    """A SIGKILL (an OOM kill of the server) skips every cleanup; the engine still removes
    the slot's container once its runner sees its stdin close."""
    engine = docker.from_env()
    slots = {"label": "analyst_env.slot=1"}
    before = {c.id for c in engine.containers.list(all=True, filters=slots)}
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_A_SLOT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        held = {c.id for c in engine.containers.list(all=True, filters=slots)} - before
        assert len(held) == 1, held
    finally:
        holder.kill()
        holder.wait()
    deadline = time.monotonic() + 60
    while held & {c.id for c in engine.containers.list(all=True, filters=slots)}:
        assert time.monotonic() < deadline, f"container {held} outlived its server"
        time.sleep(0.5)
