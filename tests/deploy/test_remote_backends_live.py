"""Opt-in, live: a whole ``analyst-env serve`` on a real Docker engine, Modal, E2B, Daytona,
OpenSandbox, Runloop, Azure, Deno, Prime, CoreWeave or a cluster with Kubernetes Agent Sandbox.

The backend tests in ``tests/backends`` drive the vendors' SDKs against local fakes;
this one needs the real service, so it runs only when asked (``ANALYST_ENV_TEST_DOCKER``,
``ANALYST_ENV_TEST_MODAL``, ``ANALYST_ENV_TEST_E2B``, ``ANALYST_ENV_TEST_DAYTONA``,
``ANALYST_ENV_TEST_AGENT_SANDBOX``, ``ANALYST_ENV_TEST_OPENSANDBOX``, ``ANALYST_ENV_TEST_RUNLOOP``,
``ANALYST_ENV_TEST_AZURE``, ``ANALYST_ENV_TEST_DENO``, ``ANALYST_ENV_TEST_PRIME``,
``ANALYST_ENV_TEST_COREWEAVE`` set to 1) and when the
vendor's credentials are set; otherwise it skips saying which. One episode goes through the
protocol: reset (the first one builds or pulls the default image, hence the long timeouts),
a cell, the oracle's ``final_answer`` scoring 1, and ``/health`` and
``/metrics`` naming the backend and counting no sandbox failure. docs/capacity.md lists
the commands.
"""

from __future__ import annotations

import os

import httpx
import pytest
from server.oracle_episode import assert_oracle_episode_scores
from server.serve_process import ServeProcess

pytestmark = pytest.mark.live

#: backend: (the variable that opts in, the credentials it needs)
BACKENDS = {
    "docker": ("ANALYST_ENV_TEST_DOCKER", ()),
    "modal": ("ANALYST_ENV_TEST_MODAL", ("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET")),
    "e2b": ("ANALYST_ENV_TEST_E2B", ("E2B_API_KEY",)),
    "daytona": ("ANALYST_ENV_TEST_DAYTONA", ("DAYTONA_API_KEY",)),
    # A cluster with deploy/kubernetes/agent-sandbox/ applied, reached through KUBECONFIG (or
    # ~/.kube/config) with ANALYST_ENV_AGENT_SANDBOX_NAMESPACE naming its namespace.
    "agent-sandbox": ("ANALYST_ENV_TEST_AGENT_SANDBOX", ()),
    "opensandbox": ("ANALYST_ENV_TEST_OPENSANDBOX", ("OPEN_SANDBOX_DOMAIN",)),
    "runloop": ("ANALYST_ENV_TEST_RUNLOOP", ("RUNLOOP_API_KEY",)),
    # The token from azure-identity (AZURE_CLIENT_* variables or az login); docs/backend-azure.md.
    "azure": (
        "ANALYST_ENV_TEST_AZURE",
        (
            "AZURE_SUBSCRIPTION_ID",
            "AZURE_RESOURCE_GROUP",
            "AZURE_SANDBOX_GROUP",
            "AZURE_SANDBOX_REGISTRY",
        ),
    ),
    "deno": ("ANALYST_ENV_TEST_DENO", ("DENO_DEPLOY_TOKEN",)),
    "prime": ("ANALYST_ENV_TEST_PRIME", ("PRIME_API_KEY",)),
    # CoreWeave builds no images: the default image is one the user pushed
    # (docs/backend-coreweave.md).
    "coreweave": (
        "ANALYST_ENV_TEST_COREWEAVE",
        ("CWSANDBOX_API_KEY", "ANALYST_ENV_COREWEAVE_IMAGE"),
    ),
}


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_a_server_on_the_real_backend_runs_and_scores_an_episode(tmp_path, backend):
    flag, credentials = BACKENDS[backend]
    if os.environ.get(flag) != "1":
        pytest.skip(f"opt-in: set {flag}=1 to run against the real {backend} service")
    missing = [name for name in credentials if not os.environ.get(name)]
    if missing:
        pytest.skip(f"{backend} credentials missing: set {', '.join(missing)}")
    with ServeProcess(tmp_path, "--backend", backend, startup_timeout_s=900) as server:
        health = httpx.get(f"{server.url}/health", timeout=30).json()
        assert health["sandbox"]["backend"] == backend
        assert_oracle_episode_scores(server.url, timeout_s=900)
        metrics = httpx.get(f"{server.url}/metrics", timeout=30).text
    assert 'analyst_env_resets_total{status="ready"} 1.0' in metrics
    assert 'analyst_env_sandbox_failures_total{stage="reset"} 0.0' in metrics
    assert 'analyst_env_sandbox_failures_total{stage="step"} 0.0' in metrics
