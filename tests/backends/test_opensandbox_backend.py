"""The OpenSandbox backend through the real ``opensandbox`` SDK against the fake server.

The contract suites run it like every backend; these tests check what is its own:
start-up fails closed in one line (no server set, server unreachable, key refused,
no engine to build on), and what it asks the server for (the recipe's sizing, a
deny-all egress policy unless told otherwise, the image) and that a finished slot's
sandbox is deleted.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import replace

import pytest

from analyst_env.envs.backends import make_backend
from analyst_env.envs.remote.bounded import BackendUnavailable
from analyst_env.envs.remote.options import WarmPool
from analyst_env.envs.remote.runner_image import resolve_default
from analyst_env.server.settings import Settings

pytest.importorskip("opensandbox", reason="the opensandbox extra is not installed")

from analyst_env.envs.remote.opensandbox_backend import OpenSandboxBackend  # noqa: E402


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _reaches(sandbox, port: int) -> str:
    probe = (
        "import socket\ntry:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=2); print('reached')\n"
        "except OSError:\n    print('blocked')"
    )
    return sandbox.run_cell(probe, timeout_s=30).stdout.strip()


def test_without_a_server_the_error_says_what_to_set(monkeypatch, tmp_path):
    monkeypatch.delenv("OPEN_SANDBOX_DOMAIN", raising=False)
    with pytest.raises(BackendUnavailable, match="set OPEN_SANDBOX_DOMAIN"):
        make_backend(Settings(backend="opensandbox", state_dir=str(tmp_path)))


def test_an_unreachable_server_fails_start_up_within_seconds(monkeypatch, tmp_path):
    monkeypatch.setenv("OPEN_SANDBOX_DOMAIN", f"127.0.0.1:{_closed_port()}")
    started = time.monotonic()
    with pytest.raises(BackendUnavailable, match="OpenSandbox server at 127.0.0.1:"):
        make_backend(
            Settings(
                backend="opensandbox",
                state_dir=str(tmp_path),
                opensandbox_image="runner",
                backend_connect_timeout_s=2,
            )
        )
    assert time.monotonic() - started < 10


def test_a_refused_api_key_fails_start_up(opensandbox_server):
    opensandbox_server.api_key = "right"
    with pytest.raises(BackendUnavailable, match="OPEN_SANDBOX_API_KEY"):
        OpenSandboxBackend(
            resolve_default, domain=opensandbox_server.domain, api_key="wrong", image="runner"
        )
    backend = OpenSandboxBackend(
        resolve_default,
        domain=opensandbox_server.domain,
        api_key="right",
        image="runner",
        pool=WarmPool(warm=0),
    )
    backend.close()


def test_building_needs_a_reachable_engine(opensandbox_server, tmp_path):
    with pytest.raises(BackendUnavailable, match="ANALYST_ENV_OPENSANDBOX_IMAGE"):
        OpenSandboxBackend(
            resolve_default,
            domain=opensandbox_server.domain,
            docker_host=f"unix://{tmp_path}/docker.sock",
            timeouts=replace(OpenSandboxBackend.timeouts, connect_s=2),
        )


def test_a_bad_egress_choice_is_refused(opensandbox_server):
    with pytest.raises(ValueError, match="egress must be one of"):
        OpenSandboxBackend(
            resolve_default, domain=opensandbox_server.domain, image="runner", egress="open"
        )


def test_a_slot_is_sized_by_its_recipe_without_egress_and_deleted_after(opensandbox_server):
    sized = resolve_default("default").model_copy(update={"cpus": 2.0, "memory_mb": 1024})
    backend = OpenSandboxBackend(
        lambda image: sized,
        domain=opensandbox_server.domain,
        image="runner:1",
        pool=WarmPool(warm=0),
    )
    assert backend.capabilities.network == "none"
    try:
        sandbox = backend.start("default", files={}, seed=1)
        assert sandbox.run_cell("print(6 * 7)", timeout_s=30).stdout == "42\n"
        if os.geteuid() == 0:  # the fake enforces the policy with a network namespace
            assert _reaches(sandbox, opensandbox_server.port) == "blocked"
        sandbox.close()
    finally:
        backend.close()
    (request,) = opensandbox_server.created
    assert request["image"]["uri"] == "runner:1"
    assert request["resourceLimits"] == {"cpu": "2", "memory": "1024Mi"}
    assert request["networkPolicy"] == {"defaultAction": "deny", "egress": []}
    deadline = time.monotonic() + 10
    while not opensandbox_server.deleted and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(opensandbox_server.deleted) == 1
    assert not opensandbox_server.boxes


def test_egress_allow_sends_no_policy_and_says_so(opensandbox_server):
    backend = OpenSandboxBackend(
        resolve_default,
        domain=opensandbox_server.domain,
        image="runner",
        egress="allow",
        pool=WarmPool(warm=0),
    )
    try:
        assert backend.capabilities.network == "host"
        sandbox = backend.start("default", files={}, seed=1)
        assert _reaches(sandbox, opensandbox_server.port) == "reached"
        sandbox.close()
    finally:
        backend.close()
    assert "networkPolicy" not in opensandbox_server.created[0]


def test_a_runner_that_dies_is_replaced_by_a_new_sandbox(opensandbox_server):
    backend = OpenSandboxBackend(
        resolve_default, domain=opensandbox_server.domain, image="runner", pool=WarmPool(warm=0)
    )
    try:
        first = backend.start("default", files={}, seed=1)
        (box,) = opensandbox_server.boxes.values()
        opensandbox_server.kill_processes(box)
        with pytest.raises(Exception):  # noqa: B017 - the kind depends on where the read was
            first.run_cell("1", timeout_s=10)
        first.close()
        second = backend.start("default", files={}, seed=1)
        assert second.run_cell("print(1 + 1)", timeout_s=30).stdout == "2\n"
        second.close()
    finally:
        backend.close()
    assert len(opensandbox_server.created) == 2
