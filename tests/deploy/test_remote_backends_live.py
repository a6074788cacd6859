"""Opt-in, live: a whole ``analyst-env serve`` on a real Docker engine, Modal, E2B, Daytona,
OpenSandbox or a cluster with Kubernetes Agent Sandbox.

The backend tests in ``tests/backends`` drive the vendors' SDKs against local fakes;
this one needs the real service, so it runs only when asked (``ANALYST_ENV_TEST_DOCKER``,
``ANALYST_ENV_TEST_MODAL``, ``ANALYST_ENV_TEST_E2B``, ``ANALYST_ENV_TEST_DAYTONA``,
``ANALYST_ENV_TEST_AGENT_SANDBOX``, ``ANALYST_ENV_TEST_OPENSANDBOX`` set to 1) and when the
vendor's credentials are set; otherwise it skips saying which. One episode goes through the
protocol: reset (the first one builds or pulls the default image, hence the long timeouts),
a cell, the oracle's ``final_answer`` scoring 1, and ``/health`` and
``/metrics`` naming the backend and counting no sandbox failure. docs/capacity.md lists
the commands.
"""

from __future__ import annotations

import asyncio
import json
import os

import httpx
import pytest
import websockets
from server.serve_process import ServeProcess

from analyst_env.datasets import load_dataset

pytestmark = pytest.mark.live

TASK = "starter-sales-000"
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
}


def call(tool: str, **arguments) -> str:
    action = {"type": "call_tool", "tool_name": tool, "arguments": arguments}
    return json.dumps({"type": "step", "data": action})


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_a_server_on_the_real_backend_runs_and_scores_an_episode(tmp_path, backend):
    flag, credentials = BACKENDS[backend]
    if os.environ.get(flag) != "1":
        pytest.skip(f"opt-in: set {flag}=1 to run against the real {backend} service")
    missing = [name for name in credentials if not os.environ.get(name)]
    if missing:
        pytest.skip(f"{backend} credentials missing: set {', '.join(missing)}")
    oracle = next(t for t in load_dataset("starter").tasks if t.id == TASK).oracle_answer
    with ServeProcess(tmp_path, "--backend", backend, startup_timeout_s=900) as server:
        health = httpx.get(f"{server.url}/health", timeout=30).json()
        assert health["sandbox"]["backend"] == backend

        async def episode() -> list[dict]:
            ws_url = server.url.replace("http://", "ws://") + "/ws"
            async with websockets.connect(ws_url, open_timeout=60, max_size=None) as ws:
                replies = []
                for frame in (
                    json.dumps({"type": "reset", "data": {"task_id": TASK}}),
                    call("add_and_execute_code_cell", code="print(6 * 7)"),
                    call("final_answer", answer=oracle),
                ):
                    await ws.send(frame)
                    replies.append(json.loads(await asyncio.wait_for(ws.recv(), timeout=900)))
                return replies

        reset, ran, answered = asyncio.run(episode())
        assert reset["data"]["observation"]["status"] == "ready", reset
        assert "42" in json.dumps(ran)
        assert answered["data"]["done"] is True and answered["data"]["reward"] == 1.0, answered
        metrics = httpx.get(f"{server.url}/metrics", timeout=30).text
    assert 'analyst_env_resets_total{status="ready"} 1.0' in metrics
    assert 'analyst_env_sandbox_failures_total{stage="reset"} 0.0' in metrics
    assert 'analyst_env_sandbox_failures_total{stage="step"} 0.0' in metrics
