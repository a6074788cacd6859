"""The Runloop backend through the unmodified ``runloop-api-client`` SDK against a fake API.

``fake_runloop`` serves the REST and SSE calls the SDK makes (paths and bodies from the
SDK's source) and runs each devbox's executions as local processes, so the slot runner
really runs, from the code the backend uploads into the devbox, behind ``line_relay``.
"""

from __future__ import annotations

import os
import time

import pytest
from relayed_episode import assert_the_uploaded_runner_serves, wait_for

from analyst_env.envs.recipes.recipe import Recipe
from analyst_env.envs.remote.bounded import BackendUnavailable
from analyst_env.envs.remote.options import WarmPool
from analyst_env.envs.remote.runner_image import resolve_default
from analyst_env.envs.sandbox import SandboxError

pytest.importorskip("runloop_api_client", reason="the runloop extra is not installed")

from analyst_env.envs.remote.runloop_backend import (  # noqa: E402
    RunloopSandboxBackend,
    custom_size,
)


def _backend(fake, resolve=resolve_default, **kwargs) -> RunloopSandboxBackend:
    return RunloopSandboxBackend(
        resolve, api_key=fake.api_key, base_url=fake.base_url, pool=WarmPool(warm=0), **kwargs
    )


@pytest.fixture
def backend(runloop_api):
    runloop_api.faults.build_failure = None
    b = _backend(runloop_api)
    yield b
    b.close()


def test_an_episode_runs_the_uploaded_runner_in_a_devbox_under_a_deny_all_policy(
    backend, runloop_api, csv_file
):
    sandbox = backend.start("default", files={"data/sales.csv": csv_file}, seed=5, env={"K": "v"})
    (devbox_id,) = [key for key in runloop_api.boxes if sandbox.label.endswith(key)]
    box, devbox = runloop_api.boxes[devbox_id], runloop_api.devboxes[devbox_id]
    assert_the_uploaded_runner_serves(sandbox, box.root)
    policy = runloop_api.policies[devbox["launch_parameters"]["network_policy_id"]]
    assert policy["egress"]["allow_all"] is False and not policy["egress"]["allowed_hostnames"]
    bp = runloop_api.blueprints[devbox["blueprint_id"]]
    assert bp["name"] == backend.artifact_name(resolve_default("default"))
    sandbox.close()  # with no warm slot wanted, the devbox is shut down in the background
    assert wait_for(lambda: devbox["status"] == "shutdown") and not os.path.exists(box.root)


def test_missing_credentials_are_one_line_refusals(monkeypatch):
    with pytest.raises(BackendUnavailable, match="needs credentials: set RUNLOOP_API_KEY"):
        RunloopSandboxBackend(resolve_default, api_key=None)


def test_a_wrong_key_stops_the_server_at_start(runloop_api):
    with pytest.raises(BackendUnavailable, match="refused the request"):
        RunloopSandboxBackend(
            resolve_default, api_key="wrong", base_url=runloop_api.base_url, pool=WarmPool(warm=0)
        )


def test_a_failed_blueprint_is_refused_with_runloops_reason_and_not_rebuilt(runloop_api):
    runloop_api.faults.build_failure = "out_of_disk"
    recipe = Recipe(name="broken", apt=["libnope"])
    resolve = {"env-broken": recipe}.__getitem__
    backend = _backend(runloop_api, resolve)
    try:
        with pytest.raises(SandboxError, match=r"failed to build \(out_of_disk\)"):
            backend.start("env-broken", files={})
        runloop_api.faults.build_failure = None
        creates = runloop_api.requests.count(("POST", "/v1/blueprints"))
        with pytest.raises(SandboxError, match="failed to build .*delete blueprint bpt_"):
            _backend(runloop_api, resolve).start("env-broken", files={})
        assert runloop_api.requests.count(("POST", "/v1/blueprints")) == creates
        name = backend.artifact_name(recipe)
        built = {bp["id"] for bp in runloop_api.blueprints.values() if bp["name"] == name}
        assert not any(d["blueprint_id"] in built for d in runloop_api.devboxes.values())
    finally:
        backend.close()


@pytest.mark.parametrize(
    ("cpus", "memory_mb", "cores", "gib"),
    [
        (0.3, 512, 0.5, 1),
        (1, 4096, 1.0, 4),
        (3, 4096, 4.0, 8),
        (2, 30000, 2.0, 16),
        (40, 1, 16.0, 32),
    ],
)
def test_sizing_rounds_up_to_a_size_runloop_accepts(cpus, memory_mb, cores, gib):
    size = custom_size(cpus, memory_mb)
    assert size == {
        "resource_size_request": "CUSTOM_SIZE", "custom_cpu_cores": cores, "custom_gb_memory": gib
    }  # fmt: skip
    assert 2 * cores <= gib <= 8 * cores or (cores == 0.5 and gib == 1)


def test_shutting_down_one_devbox_leaves_another_episode_running(backend, runloop_api):
    first = backend.start("default", files={})
    second = backend.start("default", files={})
    second.run_cell("x = 41", timeout_s=20)
    first.close()  # its devbox is shut down in the background
    time.sleep(1.0)
    assert second.run_cell("x + 1", timeout_s=20).outputs == [{"text/plain": "42"}]
    second.close()


def test_an_idle_runner_survives_the_sdks_stream_reconnects(runloop_api):
    b = _backend(runloop_api)
    b._client = b._client.with_options(timeout=1.0)  # Runloop's SDK reconnects on read timeouts
    try:
        sandbox = b.start("default", files={})
        sandbox.run_cell("x = 1", timeout_s=20)
        streams = len([r for r in runloop_api.requests if r[1].endswith("stream_stdout_updates")])
        time.sleep(2.5)
        assert sandbox.run_cell("x + 1", timeout_s=20).outputs == [{"text/plain": "2"}]
        resumed = [r for r in runloop_api.requests if r[1].endswith("stream_stdout_updates")]
        assert len(resumed) > streams  # the stream was resumed, and no frame was repeated
        sandbox.close()
    finally:
        b.close()
