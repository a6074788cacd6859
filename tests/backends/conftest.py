"""Fixtures for the remote backends: the fake Modal SDK, the fake E2B sandbox services and the
fake Daytona, Runloop, Deno, Prime and CoreWeave APIs.

The fakes stand in only for the cloud services; everything behind them is
real (the slot runner runs as a local process, E2B cells run in a real
ipykernel, the SDKs are the installed vendor packages).
"""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

# Imported before pytest's importlib mode can register a checkout folder named "daytona"
# (the package root) under that module name.
try:
    import daytona  # noqa: F401
except ImportError:
    pass

import fake_agent_sandbox  # noqa: E402
import fake_azure  # noqa: E402
import fake_daytona  # noqa: E402
import fake_e2b  # noqa: E402
import fake_modal  # noqa: E402
import fake_runloop  # noqa: E402


@pytest.fixture
def modal_sdk():
    fake_modal.reset()
    yield fake_modal
    for sandbox in fake_modal.SANDBOXES:
        sandbox.terminate()
    fake_modal.SANDBOXES.clear()


@pytest.fixture
def e2b_debug(monkeypatch):
    """E2B's SDK in debug mode against the fake sandbox services on localhost."""
    if not fake_e2b.ports_free():
        pytest.skip(
            f"ports {fake_e2b.JUPYTER_PORT}/{fake_e2b.ENVD_PORT} (fixed by E2B's debug "
            "mode) are in use"
        )
    monkeypatch.setenv("E2B_DEBUG", "true")
    monkeypatch.delenv("E2B_API_KEY", raising=False)
    with fake_e2b.FakeE2B() as fake:
        yield fake


@pytest.fixture(scope="session")
def daytona_api():
    """Daytona's API faked on a loopback port, shared by the tests (snapshots persist)."""
    pytest.importorskip("daytona", reason="the daytona extra is not installed")
    with fake_daytona.FakeDaytona() as fake:
        yield fake


@pytest.fixture(scope="session")
def runloop_api():
    """Runloop's API faked on a loopback port, shared by the tests (blueprints persist)."""
    pytest.importorskip("runloop_api_client", reason="the runloop extra is not installed")
    with fake_runloop.FakeRunloop() as fake:
        yield fake


@pytest.fixture(scope="session")
def azure_api():
    """The Azure Container Apps sandbox data plane faked on a loopback TLS port, its
    certificate trusted by the SDK's transport (``REQUESTS_CA_BUNDLE``) while it runs."""
    pytest.importorskip("azure.containerapps.sandbox", reason="the azure extra is not installed")
    before = os.environ.get("REQUESTS_CA_BUNDLE")
    with fake_azure.FakeAzureSandboxes() as fake:
        os.environ["REQUESTS_CA_BUNDLE"] = fake.ca_bundle
        try:
            yield fake
        finally:
            if before is None:
                os.environ.pop("REQUESTS_CA_BUNDLE", None)
            else:
                os.environ["REQUESTS_CA_BUNDLE"] = before


@pytest.fixture(scope="session")
def _deno_server():
    pytest.importorskip("deno_sandbox", reason="the deno extra is not installed")
    import fake_deno

    return fake_deno.FakeDeno().start()


@pytest.fixture
def deno_api(_deno_server, monkeypatch):
    """Deno's sandbox and console APIs faked on loopback ports (snapshots persist), with the
    SDK's variables pointing at them."""
    for name, value in _deno_server.env.items():
        monkeypatch.setenv(name, value)
    return _deno_server


@pytest.fixture
def agent_sandbox_cluster(monkeypatch, tmp_path):
    """A fake Kubernetes API server with Agent Sandbox, and a kubeconfig pointing at it."""
    pytest.importorskip("k8s_agent_sandbox", reason="the agent-sandbox extra is not installed")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with fake_agent_sandbox.FakeAgentSandboxCluster() as cluster:
        monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig(tmp_path / "kubeconfig")))
        yield cluster


@pytest.fixture(scope="session")
def _prime_server():
    from prime_sdk import require_prime_sdk

    require_prime_sdk()
    import fake_prime

    with fake_prime.FakePrime() as fake:
        yield fake


@pytest.fixture
def prime_api(request, monkeypatch, tmp_path):
    """Prime's API faked on a loopback port (images persist), with ``HOME`` in ``tmp_path``:
    the SDK reads ``~/.prime/config.json`` and caches sandbox tokens beside it."""
    from prime_sdk import require_prime_sdk

    require_prime_sdk()
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("PRIME_API_KEY", "PRIME_TEAM_ID", "PRIME_CONTEXT", "PRIME_API_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    fake = request.getfixturevalue("_prime_server")
    fake.faults.build_failure = None
    return fake


@pytest.fixture(scope="session")
def coreweave_api():
    """CoreWeave's gRPC API faked in a process of its own (never gRPC in this one: the SDK is
    looked for, not imported)."""
    if importlib.util.find_spec("cwsandbox") is None:
        pytest.skip("the coreweave extra is not installed")
    import fake_coreweave_process

    with fake_coreweave_process.FakeCoreWeaveProcess() as fake:
        yield fake


@pytest.fixture
def csv_file(tmp_path):
    path = tmp_path / "sales.csv"
    path.write_text("region,amount\nwest,10.5\neast,4\nwest,1.5\n")
    return str(path)


@pytest.fixture
def opensandbox_server():
    """The fake OpenSandbox server and execd (``fake_opensandbox``) on a loopback port."""
    pytest.importorskip("opensandbox", reason="the opensandbox extra is not installed")
    import fake_opensandbox

    with fake_opensandbox.FakeOpenSandbox() as fake:
        yield fake
