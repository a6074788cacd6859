"""The Prime backend through the unmodified ``prime-sandboxes`` SDK against a fake API.

``fake_prime`` serves the control plane's JSON routes and each sandbox's gateway (file upload
and the ConnectRPC command sessions, framed by hand from the SDK's messages) and runs every
command as a local process, so the slot runner really runs, from the code the backend
uploads, behind ``line_relay``, fed through ``open_process``'s stdin.
"""

from __future__ import annotations

import asyncio
import os
import time

import pytest
from relayed_episode import assert_the_uploaded_runner_serves, wait_for

from analyst_env.envs.recipes.recipe import Recipe
from analyst_env.envs.remote.bounded import BackendUnavailable
from analyst_env.envs.remote.options import Sizing, WarmPool
from analyst_env.envs.remote.runner_image import resolve_default
from analyst_env.envs.sandbox import SandboxError


def _backend(fake, resolve=resolve_default, **kwargs):
    from analyst_env.envs.remote.prime_backend import PrimeSandboxBackend

    return PrimeSandboxBackend(
        resolve, api_key=fake.api_key, base_url=fake.base_url, pool=WarmPool(warm=0), **kwargs
    )


@pytest.fixture
def backend(prime_api):
    b = _backend(prime_api)
    yield b
    b.close()


def test_the_sdk_runs_commands_and_a_live_process_on_this_venvs_connectrpc(prime_api, monkeypatch):
    import connectrpc  # noqa: F401  (this venv's 0.12, not the 0.11 the SDK pins)
    from prime_sandboxes import AsyncSandboxClient, CreateSandboxRequest

    monkeypatch.setenv("PRIME_API_BASE_URL", prime_api.base_url)

    async def round_trip() -> tuple:
        client = AsyncSandboxClient(api_key=prime_api.api_key)
        request = CreateSandboxRequest(name="probe", docker_image="img", network_allowlist=[])
        sandbox = await client.create(request)
        await client.wait_for_creation(sandbox.id)  # polls status:batchGet, then runs an echo
        done = await client.execute_command(sandbox.id, "echo out; echo err >&2; exit 3")
        process = await client.open_process(sandbox.id, "cat")
        await process.write_stdin(b"ping\n")
        echoed = await asyncio.wait_for(process.stdout.__anext__(), 10)
        await process.kill()
        code = await asyncio.wait_for(process.wait(), 10)
        await client.delete(sandbox.id)
        await client.aclose()
        return done, echoed, code

    done, echoed, code = asyncio.run(round_trip())
    assert (done.stdout, done.stderr, done.exit_code) == ("out\n", "err\n", 3)
    assert echoed == b"ping\n" and code == -9
    assert {"Start", "SendInput", "SendSignal"} <= set(prime_api.gateway.rpcs)


def test_an_episode_runs_the_uploaded_runner_in_a_sandbox_that_allows_nothing_out(
    backend, prime_api, csv_file
):
    sandbox = backend.start("default", files={"data/sales.csv": csv_file}, seed=5, env={"K": "v"})
    (sid,) = [key for key in prime_api.boxes if sandbox.label.endswith(key)]
    box, record = prime_api.boxes[sid], prime_api.sandboxes[sid]
    assert_the_uploaded_runner_serves(sandbox, box.root)
    assert record["networkAllowlist"] == [] and record["vm"] is True
    name = backend.artifact_name(resolve_default("default"))
    assert record["dockerImage"].endswith(f"/{name}:latest")
    sandbox.close()  # with no warm slot wanted, the sandbox is deleted in the background
    assert wait_for(lambda: record["status"] == "TERMINATED") and not os.path.exists(box.root)


def test_sizing_is_rounded_up_to_whole_cores_and_gib(prime_api):
    b = _backend(prime_api, sizing=Sizing(cpus=1.5, memory_mb=3000, disk_mb=9000))
    try:
        b.start("default", files={}).close()
        body = prime_api.created[-1]
        assert (body["cpu_cores"], body["memory_gb"], body["disk_size_gb"]) == (2, 3, 9)
        assert body["timeout_minutes"] == 60 and body["vm"] is True
    finally:
        b.close()


def test_missing_credentials_are_one_line_refusals():
    from analyst_env.envs.remote.prime_backend import PrimeSandboxBackend

    with pytest.raises(BackendUnavailable, match="needs credentials: set PRIME_API_KEY"):
        PrimeSandboxBackend(resolve_default, api_key=None)


def test_a_wrong_key_stops_the_server_at_start(prime_api):
    from analyst_env.envs.remote.prime_backend import PrimeSandboxBackend

    with pytest.raises(BackendUnavailable, match="refused the request"):
        PrimeSandboxBackend(resolve_default, api_key="wrong", base_url=prime_api.base_url)


def test_a_failed_image_is_refused_with_primes_reason_and_not_rebuilt(prime_api):
    prime_api.faults.build_failure = "apt-get exited with 100"
    recipe = Recipe(name="broken", apt=["libnope"])
    resolve = {"env-broken": recipe}.__getitem__
    b = _backend(prime_api, resolve)
    try:
        with pytest.raises(SandboxError, match=r"failed to build \(apt-get exited with 100\)"):
            b.start("env-broken", files={})
        prime_api.faults.build_failure = None
        builds = prime_api.requests.count(("POST", "/api/v1/images/build"))
        with pytest.raises(SandboxError, match="failed to build"):
            _backend(prime_api, resolve).start("env-broken", files={})
        assert prime_api.requests.count(("POST", "/api/v1/images/build")) == builds
        assert not any(b.artifact_name(recipe) in c["docker_image"] for c in prime_api.created)
    finally:
        b.close()


def test_deleting_one_sandbox_leaves_another_episode_running(backend):
    first = backend.start("default", files={})
    second = backend.start("default", files={})
    second.run_cell("x = 41", timeout_s=20)
    first.close()  # its sandbox is deleted in the background
    time.sleep(1.0)
    assert second.run_cell("x + 1", timeout_s=20).outputs == [{"text/plain": "42"}]
    second.close()
