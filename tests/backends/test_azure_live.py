"""Opt-in, live: the azure backend against a real Azure Container Apps sandbox group.

Run with ``ANALYST_ENV_TEST_AZURE=1 pytest tests/backends/test_azure_live.py`` and the
variables ``docs/backend-azure.md`` lists (``AZURE_SUBSCRIPTION_ID``,
``AZURE_RESOURCE_GROUP``, ``AZURE_SANDBOX_GROUP``, ``AZURE_REGION`` or
``AZURE_SANDBOX_ENDPOINT``, ``AZURE_SANDBOX_REGISTRY``; the token from azure-identity's
usual ``AZURE_CLIENT_ID``/``AZURE_TENANT_ID``/``AZURE_CLIENT_SECRET`` or ``az login``).
A missing variable fails at once with the backend's own one-line message.

The first test checks on the real service what the local fake only assumes: a command
detached from its ``exec`` keeps running after the request is answered (the spooled
runner depends on it). The second runs cells on the backend, with the default recipe's
runner image pushed to the registry beforehand (docs/backend-azure.md, "Baked images").
"""

from __future__ import annotations

import os
import time

import pytest

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def settings():
    if os.environ.get("ANALYST_ENV_TEST_AZURE") != "1":
        pytest.skip("opt-in: set ANALYST_ENV_TEST_AZURE=1 to run against a real sandbox group")
    pytest.importorskip("azure.containerapps.sandbox", reason="pip install 'analyst-env[azure]'")
    from analyst_env.envs.remote.azure_backend import settings_from_env
    from analyst_env.envs.remote.bounded import BackendUnavailable

    try:
        return settings_from_env()
    except BackendUnavailable as exc:
        missing = str(exc)
    pytest.fail(missing, pytrace=False)


def test_a_detached_command_outlives_its_exec(settings):
    from azure.containerapps.sandbox import EgressPolicy, SandboxGroupClient
    from azure.identity import DefaultAzureCredential

    group = SandboxGroupClient(
        settings["endpoint"],
        DefaultAzureCredential(),
        subscription_id=settings["subscription_id"],
        resource_group=settings["resource_group"],
        sandbox_group=settings["sandbox_group"],
    )
    sandbox = group.begin_create_sandbox(
        disk="ubuntu", egress_policy=EgressPolicy(default_action="Deny")
    ).result()
    try:
        started = sandbox.exec(
            "mkdir -p /tmp/spool && (setsid nohup sh -c 'sleep 5; echo later > /tmp/spool/late'"
            " > /dev/null 2>&1 < /dev/null &)"
        )
        assert started.exit_code == 0, started
        deadline = time.monotonic() + 60
        while sandbox.exec("cat /tmp/spool/late").stdout != "later\n":
            assert time.monotonic() < deadline, "the detached command did not outlive its exec"
            time.sleep(2)
    finally:
        sandbox.delete()


def test_cells_keep_their_state_on_the_backend(settings):
    from analyst_env.envs.remote.azure_backend import AzureSandboxBackend
    from analyst_env.envs.remote.options import WarmPool
    from analyst_env.envs.remote.runner_image import resolve_default

    backend = AzureSandboxBackend(resolve_default, **settings, pool=WarmPool(warm=0))
    try:
        sandbox = backend.start("default", files={})
        try:
            assert sandbox.run_cell("x = 41", timeout_s=60).error is None
            assert sandbox.run_cell("x + 1", timeout_s=60).outputs == [{"text/plain": "42"}]
        finally:
            sandbox.close()
    finally:
        backend.close()
