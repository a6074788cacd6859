"""The Daytona backend through the unmodified ``daytona`` SDK against a fake of Daytona's API.

``fake_daytona`` serves the HTTP and WebSocket calls the SDK makes (shapes from its
generated clients and Daytona's daemon) and runs each sandbox's commands as local
processes, so the slot runner really runs, from the code the backend uploads into
the sandbox, behind ``line_relay``.
"""

from __future__ import annotations

import base64
import hashlib
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from relayed_episode import assert_the_uploaded_runner_serves, wait_for

from analyst_env.envs.recipes.recipe import Recipe
from analyst_env.envs.remote.artifacts import recipe_resolver
from analyst_env.envs.remote.bounded import BackendUnavailable
from analyst_env.envs.remote.dockerfile import dockerfile
from analyst_env.envs.remote.line_relay import EXIT_MARKER, encode_line
from analyst_env.envs.remote.options import Timeouts, WarmPool
from analyst_env.envs.remote.runner_image import resolve_default
from analyst_env.envs.sandbox import SandboxError

pytest.importorskip("daytona", reason="the daytona extra is not installed")

from analyst_env.envs.remote.daytona_backend import DaytonaSandboxBackend  # noqa: E402


def _backend(fake, resolve=resolve_default, **kwargs) -> DaytonaSandboxBackend:
    return DaytonaSandboxBackend(
        resolve, api_key=fake.api_key, api_url=fake.api_url, pool=WarmPool(warm=0), **kwargs
    )


def _fake_sandbox(fake, sandbox):
    (found,) = [sb for sb in fake.sandboxes.values() if sandbox.label.endswith(sb.id)]
    return found


@pytest.fixture
def backend(daytona_api):
    daytona_api.faults.build_failure = None
    daytona_api.faults.hang_s = 0.0
    b = _backend(daytona_api)
    yield b
    b.close()


def test_an_episode_runs_the_uploaded_runner_in_a_sandbox_without_network(
    backend, daytona_api, csv_file
):
    sandbox = backend.start("default", files={"data/sales.csv": csv_file}, seed=5, env={"K": "v"})
    fake = _fake_sandbox(daytona_api, sandbox)
    assert_the_uploaded_runner_serves(sandbox, fake.root)
    body = fake.body
    assert body["networkBlockAll"] is True and body["autoDeleteInterval"] == 0
    assert body["labels"]["app"] == "analyst-env" and body["snapshot"] == backend.artifact_name(
        resolve_default("default")
    )
    sandbox.close()  # with no warm slot wanted, the slot's sandbox is deleted in the background
    assert wait_for(lambda: fake.state == "destroyed") and not os.path.exists(fake.root)


@pytest.mark.skipif(
    os.geteuid() != 0,
    reason="the fake blocks the network with a network namespace, which needs root",
)
def test_megabytes_cross_the_text_stream_both_ways(backend, tmp_path):
    payload = os.urandom(3 * 1024 * 1024 + 17)  # several input requests, many output lines
    source = tmp_path / "big.bin"
    source.write_bytes(payload)
    sandbox = backend.start("default", files={"big.bin": str(source)})
    result = sandbox.run_cell(
        "import hashlib\nprint(hashlib.sha256(open('big.bin', 'rb').read()).hexdigest())",
        timeout_s=60,
    )
    assert result.stdout.strip() == hashlib.sha256(payload).hexdigest()
    sandbox.put_file("copy.bin", payload[::-1])
    assert sandbox.get_file("copy.bin") == payload[::-1]
    sandbox.close()


def test_sandbox_has_no_network(backend):
    sandbox = backend.start("default", files={})
    result = sandbox.run_cell(
        "import socket\ns = socket.socket()\ns.settimeout(2)\ns.connect(('1.1.1.1', 80))",
        timeout_s=20,
    )
    assert result.error is not None and result.error.name in ("OSError", "TimeoutError")
    sandbox.close()


def test_snapshot_is_built_once_from_the_recipe_dockerfile(daytona_api, tmp_path):
    recipe = Recipe(name="sized", preload=["json"], cpus=2, memory_mb=3000, disk_mb=5000)
    out = tmp_path / recipe.content_hash()
    first = _backend(daytona_api)
    logs: list[str] = []
    daytona_api.build_s = 2.5  # long enough for the SDK (polling each second) to follow the logs
    try:
        first.bake(recipe, out, log=logs.append, progress=lambda f: None)
    finally:
        daytona_api.build_s = 0.3
    name = first.artifact_name(recipe)
    snapshot = daytona_api.snapshots[name]
    assert snapshot["state"] == "active"
    assert (snapshot["cpu"], snapshot["mem"], snapshot["disk"]) == (2, 3, 5)
    small = first._resources(Recipe(name="small", disk_mb=500))
    assert (small.cpu, small.memory, small.disk) == (1, 4, 3)  # the disk holds the image too
    text = daytona_api.dockerfiles[name]
    assert text == dockerfile(recipe, runner_baked=False)
    assert "\nCOPY " not in text and 'CMD ["sleep", "infinity"]' in text
    assert "chown 1000:1000 /work /opt/analyst_env" in text
    assert first.is_built(out) and any("is ready" in line for line in logs)
    assert any(line.startswith("Step 1/") and "FROM python:" in line for line in logs), logs
    assert recipe_resolver(tmp_path, "daytona")("env-" + recipe.content_hash()) == recipe
    first.close()
    creates = [r for r in daytona_api.requests if r == ("POST", "/api/snapshots")]
    second = _backend(daytona_api)
    second.bake(recipe, tmp_path / "again", log=logs.append, progress=lambda f: None)
    second.close()
    assert [r for r in daytona_api.requests if r == ("POST", "/api/snapshots")] == creates


def test_an_inactive_snapshot_is_activated_not_rebuilt(daytona_api, tmp_path):
    recipe = Recipe(name="dormant", preload=["json"], cpus=3)
    first = _backend(daytona_api)
    first.bake(recipe, tmp_path / "a", log=lambda line: None, progress=lambda f: None)
    first.close()
    name = first.artifact_name(recipe)
    daytona_api.snapshots[name]["state"] = "inactive"  # Daytona deactivates unused snapshots
    builds = daytona_api.requests.count(("POST", "/api/snapshots"))
    second = _backend(daytona_api)
    second.bake(recipe, tmp_path / "b", log=lambda line: None, progress=lambda f: None)
    second.close()
    assert daytona_api.snapshots[name]["state"] == "active"
    snapshot_id = daytona_api.snapshots[name]["id"]
    assert ("POST", f"/api/snapshots/{snapshot_id}/activate") in daytona_api.requests
    assert daytona_api.requests.count(("POST", "/api/snapshots")) == builds


def test_a_failed_snapshot_is_refused_with_its_reason(daytona_api, tmp_path):
    daytona_api.faults.build_failure = "E: Unable to locate package libnope"
    recipe = Recipe(name="broken", apt=["libnope"])
    resolve = {"env-broken": recipe}.__getitem__
    backend = _backend(daytona_api, resolve)
    try:
        with pytest.raises(SandboxError, match="build_failed.*Unable to locate package libnope"):
            backend.start("env-broken", files={})
        daytona_api.faults.build_failure = None
        creates = len([r for r in daytona_api.requests if r == ("POST", "/api/snapshots")])
        with pytest.raises(SandboxError, match="failed to build .*daytona snapshot delete"):
            _backend(daytona_api, resolve).start("env-broken", files={})
        assert creates == len([r for r in daytona_api.requests if r == ("POST", "/api/snapshots")])
        assert not daytona_api.sandboxes or all(
            sb.snapshot["name"] != backend.artifact_name(recipe)
            for sb in daytona_api.sandboxes.values()
        )
    finally:
        backend.close()


def test_runner_killed_mid_cell_is_reported_and_the_backend_recovers(
    backend, daytona_api, csv_file
):
    sandbox = backend.start("default", files={"sales.csv": csv_file})
    fake = _fake_sandbox(daytona_api, sandbox)

    def kill_runner() -> None:
        for commands in fake.sessions.values():
            for command in commands.values():
                os.killpg(command.proc.pid, signal.SIGKILL)

    threading.Timer(1.0, kill_runner).start()
    with pytest.raises(SandboxError, match="is gone"):
        sandbox.run_cell("import time\ntime.sleep(30)", timeout_s=60)
    sandbox.close()
    fresh = backend.start("default", files={"sales.csv": csv_file})
    assert fresh.run_cell("open('sales.csv').readline()", timeout_s=20).outputs == [
        {"text/plain": "'region,amount\\n'"}
    ]
    fresh.close()


def test_missing_credentials_fail_at_once(daytona_api):
    with pytest.raises(BackendUnavailable, match="set DAYTONA_API_KEY"):
        DaytonaSandboxBackend(resolve_default, api_key=None, api_url=daytona_api.api_url)


def test_a_refused_key_stops_the_backend_at_start(daytona_api):
    with pytest.raises(BackendUnavailable, match="refused the request.*Invalid credentials"):
        DaytonaSandboxBackend(resolve_default, api_key="wrong", api_url=daytona_api.api_url)


def test_an_unanswering_api_fails_within_the_bound(daytona_api):
    daytona_api.faults.hang_s = 20
    started = time.monotonic()
    try:
        with pytest.raises(BackendUnavailable, match="did not answer within 1 s"):
            _backend(daytona_api, timeouts=Timeouts(connect_s=1))
    finally:
        daytona_api.faults.hang_s = 0.0
    assert time.monotonic() - started < 5


def test_the_relay_carries_binary_frames_over_text_lines():
    frames = [b"\x00\x00\x00\x05hello", bytes(range(256)), b"\x01\x01\x01\x02\x02\x02\n"]
    relay = subprocess.run(
        [sys.executable, "-m", "analyst_env.envs.remote.line_relay", "cat"],
        input="".join(encode_line(f) for f in frames) + "not base64!\n",
        capture_output=True,
        text=True,
        timeout=30,
    )
    lines = relay.stdout.splitlines()
    assert lines[-1] == f"{EXIT_MARKER} 0" and relay.returncode == 0
    assert b"".join(base64.b64decode(line) for line in lines[:-1]) == b"".join(frames)
    assert "dropped a line that is not base64" in relay.stderr
