"""The OpenSandbox backend against a real ``opensandbox-server`` with its Docker runtime.

The server lives in its own venv (``.venv/opensandbox-server``: it pulls in the
kubernetes and grpc clients, which the package has no use for) and needs a Docker
engine (``DOCKER_HOST``); without either the tests skip, saying which. They check
what the fake cannot prove: the real control plane accepts the backend's start-up
call with its API key and refuses it without, in one line; a sandbox the server
cannot create (an image no registry has) becomes a ``SandboxError`` carrying the
server's reason; and an episode runs in a real container the server made from the
runner image built on the engine, reached through the endpoint the server reports,
and the sandbox is deleted after. execd's own image (``opensandbox/execd``) comes
from Docker Hub, so the server is configured with an image holding
``tests/backends/execd_standin.py`` instead (built here from the local base image, no network):
execd is the one part not real. With the real execd image,
``tests/deploy/test_remote_backends_live.py`` runs a whole server on OpenSandbox when
``ANALYST_ENV_TEST_OPENSANDBOX=1``.
"""

from __future__ import annotations

import io
import os
import socket
import subprocess
import tarfile
import time
from pathlib import Path

import httpx
import pytest

from analyst_env.envs.remote.bounded import BackendUnavailable
from analyst_env.envs.remote.options import Timeouts, WarmPool
from analyst_env.envs.remote.runner_image import resolve_default
from analyst_env.envs.sandbox import SandboxError

pytestmark = pytest.mark.live
pytest.importorskip("opensandbox", reason="the opensandbox extra is not installed")

from analyst_env.envs.remote.opensandbox_backend import OpenSandboxBackend  # noqa: E402

SERVER = Path(__file__).resolve().parents[2] / ".venv/opensandbox-server/bin/opensandbox-server"
API_KEY = "analyst-env-live-test"
EXECD_IMAGE = "analyst-env-execd-standin:test"
STANDIN = Path(__file__).resolve().parents[1] / "backends" / "execd_standin.py"
BASE_IMAGE = "python:3.11-slim-bookworm"


def _build_execd_image() -> None:
    """An execd image as the server expects one (``/execd``, ``/bootstrap.sh``, a ``tail``),
    holding the stand-in."""
    docker = pytest.importorskip("docker", reason="the docker extra is not installed")
    client = docker.from_env()
    try:
        client.images.get(BASE_IMAGE)
    except docker.errors.ImageNotFound:
        pytest.skip(f"the engine has no {BASE_IMAGE} to build the execd stand-in on")
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        for name, data, mode in (
            ("Dockerfile", f"FROM {BASE_IMAGE}\nCOPY execd bootstrap.sh /\n".encode(), 0o644),
            ("execd", STANDIN.read_bytes(), 0o755),
            ("bootstrap.sh", b'#!/bin/sh\n/opt/opensandbox/execd &\nexec "$@"\n', 0o755),
        ):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    context.seek(0)
    client.images.build(fileobj=context, custom_context=True, tag=EXECD_IMAGE, rm=True)
    client.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server_domain(tmp_path_factory):
    if not SERVER.exists():
        pytest.skip(
            f"no OpenSandbox server at {SERVER}: python -m venv .venv/opensandbox-server && "
            ".venv/opensandbox-server/bin/pip install opensandbox-server==1.1.1"
        )
    if not os.environ.get("DOCKER_HOST"):
        pytest.skip("the OpenSandbox server's Docker runtime needs an engine: set DOCKER_HOST")
    _build_execd_image()
    home = tmp_path_factory.mktemp("opensandbox-server")
    config = home / "sandbox.toml"
    subprocess.run(
        [str(SERVER), "init-config", str(config), "--example", "docker"],
        check=True,
        capture_output=True,
    )
    port = _free_port()
    text = config.read_text()
    text = text.replace("port = 8080", f'port = {port}\napi_key = "{API_KEY}"', 1)
    text = text.replace("~/.opensandbox/opensandbox.db", str(home / "opensandbox.db"))
    text = text.replace(
        'execd_image = "opensandbox/execd:v1.1.0"', f'execd_image = "{EXECD_IMAGE}"'
    )
    assert EXECD_IMAGE in text, "the example config no longer names opensandbox/execd:v1.1.0"
    config.write_text(text.replace('# publish_host = "127.0.0.1"', 'publish_host = "127.0.0.1"'))
    log = open(home / "server.log", "wb")
    proc = subprocess.Popen(
        [str(SERVER), "--config", str(config)], stdout=log, stderr=subprocess.STDOUT, cwd=home
    )
    domain = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://{domain}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    f"opensandbox-server did not start: {(home / 'server.log').read_text()}"
                )
            time.sleep(0.2)
        yield domain
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_the_real_server_takes_the_key_and_refuses_another(server_domain):
    with pytest.raises(BackendUnavailable, match="OPEN_SANDBOX_API_KEY"):
        OpenSandboxBackend(resolve_default, domain=server_domain, api_key="wrong", image="x")
    backend = OpenSandboxBackend(
        resolve_default, domain=server_domain, api_key=API_KEY, image="x", pool=WarmPool(warm=0)
    )
    backend.close()


def test_a_sandbox_the_server_cannot_create_is_a_sandbox_error(server_domain):
    backend = OpenSandboxBackend(
        resolve_default,
        domain=server_domain,
        api_key=API_KEY,
        image="analyst-env-missing/runner:none",
        pool=WarmPool(warm=0),
        timeouts=Timeouts(boot_s=60),
    )
    try:
        with pytest.raises(SandboxError, match="OpenSandbox did not create a sandbox: .*image"):
            backend.start("default", files={}, seed=1)
    finally:
        backend.close()
    listed = httpx.get(
        f"http://{server_domain}/v1/sandboxes",
        headers={"OPEN-SANDBOX-API-KEY": API_KEY},
        timeout=10,
    ).json()
    assert listed["items"] == [], listed


def _listed(domain: str) -> list:
    return httpx.get(
        f"http://{domain}/v1/sandboxes", headers={"OPEN-SANDBOX-API-KEY": API_KEY}, timeout=10
    ).json()["items"]


def test_an_episode_runs_in_a_container_the_server_made(server_domain):
    # The runner image is built on the engine as the Docker backend builds it (a cache hit
    # when the Docker backend's tests ran first); no egress sidecar image here, so "allow".
    backend = OpenSandboxBackend(
        resolve_default,
        domain=server_domain,
        api_key=API_KEY,
        egress="allow",
        docker_host=os.environ["DOCKER_HOST"],
        build_network=os.environ.get("ANALYST_ENV_TEST_DOCKER_BUILD_NETWORK"),
        pool=WarmPool(warm=0),
        timeouts=Timeouts(boot_s=120),
    )
    try:
        sandbox = backend.start("default", files={}, seed=3)
        (info,) = _listed(server_domain)
        assert info["image"]["uri"] == backend.artifact_name(resolve_default("default"))
        cell = sandbox.run_cell("import pandas; x = 6 * 7; print(x)", timeout_s=60)
        assert cell.stdout == "42\n", cell
        assert sandbox.run_cell("print(x + 1)", timeout_s=30).stdout == "43\n"
        shell = sandbox.run_shell("cat /proc/1/cgroup >/dev/null && hostname", timeout_s=30)
        assert shell.exit_code == 0 and shell.stdout.strip(), shell
        sandbox.close()
    finally:
        backend.close()
    deadline = time.monotonic() + 30
    while _listed(server_domain) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _listed(server_domain) == []
