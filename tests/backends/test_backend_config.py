"""Choosing a backend by configuration, its start-up errors, and a live server on a remote backend.

Every bad configuration must fail at start-up within seconds with a message
that says what to set; a runner lost in the middle of a cell must become a
tool error while the server keeps serving.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from openenv.core import GenericEnvClient

from analyst_env.envs.backend_catalog import importable
from analyst_env.envs.backends import BACKENDS, make_backend
from analyst_env.envs.remote.artifacts import recipe_resolver
from analyst_env.envs.remote.bounded import BackendUnavailable
from analyst_env.envs.remote.modal_backend import ModalSandboxBackend
from analyst_env.envs.remote.options import WarmPool
from analyst_env.envs.remote.runner_image import RUNNER_REVISION, resolve_default
from analyst_env.server.app import build_app
from analyst_env.server.local_server import BackgroundServer
from analyst_env.server.runtime import Runtime
from analyst_env.server.settings import Settings


def test_registered_backends():
    assert {"local", "docker", "modal", "e2b", "daytona", "agent-sandbox", "opensandbox"} <= set(
        BACKENDS
    )
    assert "runloop" in BACKENDS and "deno" in BACKENDS


def test_unknown_backend_lists_the_choices(tmp_path):
    with pytest.raises(
        ValueError,
        match=r"unknown sandbox backend 'nosuch'; "
        r"available: agent-sandbox, .*daytona, .*docker, e2b, .*local, modal, opensandbox",
    ):
        make_backend(Settings(backend="nosuch", state_dir=str(tmp_path)))


def test_modal_without_credentials(monkeypatch, tmp_path):
    monkeypatch.delenv("MODAL_TOKEN_ID", raising=False)
    monkeypatch.delenv("MODAL_TOKEN_SECRET", raising=False)
    with pytest.raises(BackendUnavailable, match="set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET"):
        make_backend(Settings(backend="modal", state_dir=str(tmp_path)))


def test_e2b_without_credentials(monkeypatch, tmp_path):
    monkeypatch.delenv("E2B_API_KEY", raising=False)
    monkeypatch.delenv("E2B_DEBUG", raising=False)
    with pytest.raises(BackendUnavailable, match="set E2B_API_KEY"):
        make_backend(Settings(backend="e2b", state_dir=str(tmp_path)))


def test_docker_engine_unreachable(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/docker.sock")
    started = time.monotonic()
    with pytest.raises(BackendUnavailable, match="cannot reach the Docker engine"):
        make_backend(
            Settings(backend="docker", state_dir=str(tmp_path), backend_connect_timeout_s=2)
        )
    assert time.monotonic() - started < 10


def test_settings_read_backend_fields_from_the_environment():
    settings = Settings.from_env(
        {
            "ANALYST_ENV_BACKEND": "docker",
            "ANALYST_ENV_DOCKER_RUNTIME": "runsc",
            "ANALYST_ENV_REMOTE_WARM_SLOTS": "3",
        }
    )
    assert (settings.backend, settings.docker_runtime, settings.remote_warm_slots) == (
        "docker",
        "runsc",
        3,
    )


@pytest.mark.parametrize(
    "backend,env,message",
    [
        ("nope", {}, "unknown sandbox backend 'nope'"),
        ("modal", {}, "set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET"),
        ("daytona", {}, "needs credentials: set DAYTONA_API_KEY"),
        ("runloop", {}, "needs credentials: set RUNLOOP_API_KEY"),
        (
            "azure",
            {},
            "needs its sandbox group and image registry: set AZURE_SUBSCRIPTION_ID"
            if importable("azure.containerapps.sandbox")
            else "needs the optional package 'azure.containerapps.sandbox'",  # not in dev
        ),
        ("deno", {}, "needs credentials: set DENO_DEPLOY_TOKEN"),
        (
            "docker",
            {"DOCKER_HOST": "unix:///nonexistent/docker.sock"},
            "cannot reach the Docker engine",
        ),
        ("agent-sandbox", {"KUBECONFIG": "/nonexistent/kubeconfig"}, "set KUBECONFIG"),
    ],
)
def test_serve_refuses_a_bad_backend_with_a_message(backend, env, message, tmp_path):
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(
            ("MODAL_", "E2B_", "DOCKER_", "DAYTONA_", "RUNLOOP_", "AZURE_", "DENO_", "ANALYST_ENV_")
        )
    }
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "analyst_env.cli", "serve", "--backend", backend, "--port", "0"],
        env={**clean, **env, "ANALYST_ENV_STATE_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert time.monotonic() - started < 60


@pytest.mark.live
def test_server_survives_a_remote_runner_lost_mid_cell(modal_sdk, tiny_dataset, tmp_path):
    settings = Settings(cell_timeout_s=60, record_trajectories=False, state_dir=str(tmp_path))
    backend = ModalSandboxBackend(
        resolve_default, token_id="ak", token_secret="as", sdk=modal_sdk, pool=WarmPool(warm=0)
    )
    runtime = Runtime(settings, backend=backend, datasets=[tiny_dataset])
    try:
        with BackgroundServer(build_app(settings, runtime=runtime)) as url:
            with GenericEnvClient(base_url=url).sync() as env:
                env.reset(task_id="tiny-csv")
                victims = [
                    p for sb in modal_sdk.SANDBOXES for p in sb.processes if p.poll() is None
                ]
                threading.Timer(
                    1.5, lambda: [os.killpg(p.pid, signal.SIGKILL) for p in victims]
                ).start()
                step = env.step(
                    {
                        "type": "call_tool",
                        "tool_name": "add_and_execute_code_cell",
                        "arguments": {"code": "import time; time.sleep(30)"},
                    }
                )
                text = step.observation["result"]["data"]
                assert "the sandbox failed" in text and "is gone" in text
                env.reset(task_id="tiny-csv")
                again = env.step(
                    {
                        "type": "call_tool",
                        "tool_name": "run_sql",
                        "arguments": {"query": "SELECT SUM(amount) FROM sales"},
                    }
                )
                assert "7319.25" in again.observation["result"]["data"]
    finally:
        runtime.close()


@pytest.mark.live
def test_environment_built_for_a_remote_backend_binds_episodes(modal_sdk, tiny_dataset, tmp_path):
    """/envs on the Modal backend: the build publishes the recipe's image, and a bound reset runs in
    it."""
    import httpx

    settings = Settings(
        cell_timeout_s=60, record_trajectories=False, state_dir=str(tmp_path), allow_builds=True
    )
    resolve = recipe_resolver(tmp_path / "envs" / "images", "modal")  # what make_backend passes
    backend = ModalSandboxBackend(
        resolve, token_id="ak", token_secret="as", sdk=modal_sdk, pool=WarmPool(warm=0)
    )
    runtime = Runtime(settings, backend=backend, datasets=[tiny_dataset])
    try:
        with BackgroundServer(build_app(settings, runtime=runtime)) as url:
            created = httpx.post(
                f"{url}/envs",
                json={"name": "stats", "pip": "statsmodels", "preload": "json"},
                timeout=30,
            )
            assert created.status_code == 201, created.text
            digest = created.json()["hash"]
            deadline = time.monotonic() + 120
            status = {}
            while time.monotonic() < deadline:
                status = httpx.get(f"{url}/envs/stats/status", timeout=30).json()
                if status["status"] in ("ready", "failed"):
                    break
                time.sleep(0.2)
            assert status["status"] == "ready", status
            published = f"analyst-env:{digest}-r{RUNNER_REVISION}"
            assert published in modal_sdk.PUBLISHED
            assert ("uv_pip_install", ("statsmodels",), {"index_url": None}) in modal_sdk.PUBLISHED[
                published
            ]
            with GenericEnvClient(base_url=url).sync() as env:
                first = env.reset(task_id="tiny-csv", environment="stats")
                assert first.observation["metadata"]["environment"] == "stats"
                step = env.step(
                    {
                        "type": "call_tool",
                        "tool_name": "add_and_execute_code_cell",
                        "arguments": {"code": "import sys; 'json' in sys.modules"},
                    }
                )
                assert "True" in step.observation["result"]["data"]
            creates = [c for c in modal_sdk.CALLS if c[0] == "Sandbox.create"]
            assert creates[-1][2]["image"]._name == published
    finally:
        runtime.close()


def test_local_slots_follow_max_sessions(tmp_path):
    """2,000 sessions need more than the 1,024 slots a bare backend has (episodes, parked
    episodes, standbys and teardowns all hold one)."""
    small = make_backend(Settings(state_dir=str(tmp_path), max_sessions=64))
    large = make_backend(Settings(state_dir=str(tmp_path), max_sessions=2000, max_standbys=256))
    try:
        assert small._slots.capacity == 1024
        assert large._slots.capacity >= 2 * 2000 + 256
    finally:
        small.close()
        large.close()
