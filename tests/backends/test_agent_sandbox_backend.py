"""The agent-sandbox backend through the real ``k8s-agent-sandbox`` SDK and ``kubernetes`` client,
against the fake API server (``fake_agent_sandbox.py``): what it claims, what it refuses at
start-up, and that closing it leaves no claim and no runner behind. The shared behaviour of
its sandboxes is checked by ``test_sandbox_contract.py``.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time

import pytest
import yaml
from fake_agent_sandbox import MANIFESTS, FakeAgentSandboxCluster

from analyst_env.envs.backends import make_backend
from analyst_env.envs.remote.bounded import BackendUnavailable
from analyst_env.envs.remote.options import WarmPool
from analyst_env.envs.remote.runner_image import (
    RUNNER_REVISION,
    artifact_tag,
    default_recipe,
    resolve_default,
)
from analyst_env.envs.sandbox import SandboxError
from analyst_env.server.settings import Settings

pytest.importorskip("k8s_agent_sandbox", reason="the agent-sandbox extra is not installed")

from analyst_env.envs.remote.agent_sandbox_backend import (  # noqa: E402
    AgentSandboxBackend,
    network_problem,
)


def settings(tmp_path, namespace: str, **extra) -> Settings:
    return Settings(
        backend="agent-sandbox",
        state_dir=str(tmp_path / "state"),
        agent_sandbox_namespace=namespace,
        remote_warm_slots=0,
        **extra,
    )


def test_an_episode_claims_a_sandbox_from_the_warm_pool_and_closing_deletes_it(
    agent_sandbox_cluster, tmp_path, csv_file
):
    cluster = agent_sandbox_cluster
    backend = make_backend(settings(tmp_path, cluster.namespace))
    try:
        sandbox = backend.start("default", files={"data/sales.csv": csv_file}, seed=1)
        result = sandbox.run_cell(
            "import pandas as pd\npd.read_csv('data/sales.csv').shape", timeout_s=60
        )
        assert result.outputs == [{"text/plain": "(3, 2)"}], result
        (claim,) = cluster.claims()
        assert claim["spec"]["warmPoolRef"] == {"name": "analyst-env-sandbox"}
        assert claim["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "analyst-env"
        # A server that dies leaves no claim for long: the controller deletes it at shutdownTime.
        assert claim["spec"]["lifecycle"]["shutdownPolicy"] == "Delete"
        pod = claim["status"]["sandbox"]["name"]
        assert ("exec", "pods/exec", pod) in cluster.requests
        (runner,) = cluster.processes[pod]
        sandbox.close()
    finally:
        backend.close()
    deadline = time.monotonic() + 10  # a slot not kept warm is disposed of in the background
    while (cluster.claims() or runner.returncode is None) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert cluster.claims() == []
    assert runner.returncode is not None, "the runner outlived its deleted sandbox"
    # The SDK's client keeps a handle per claim until the claim is deleted through it.
    assert backend._client._active_connection_sandboxes == {}


def test_without_a_kubeconfig_start_up_says_what_to_set(monkeypatch, tmp_path):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    with pytest.raises(BackendUnavailable, match="set KUBECONFIG to a kubeconfig file"):
        make_backend(settings(tmp_path, "default"))


def test_in_a_pod_without_a_service_account_token_start_up_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")
    with pytest.raises(BackendUnavailable, match="in a pod without a usable service account"):
        make_backend(settings(tmp_path, "default"))


def test_without_the_sdk_start_up_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "k8s_agent_sandbox", None)
    with pytest.raises(BackendUnavailable, match=r"pip install 'analyst-env\[agent-sandbox\]'"):
        make_backend(settings(tmp_path, "default"))


def test_a_wrong_token_fails_at_start_up(agent_sandbox_cluster, monkeypatch, tmp_path):
    config = agent_sandbox_cluster.kubeconfig(tmp_path / "bad", token="wrong")
    monkeypatch.setenv("KUBECONFIG", str(config))
    with pytest.raises(BackendUnavailable, match=r"not authenticated .*\[401"):
        make_backend(settings(tmp_path, agent_sandbox_cluster.namespace))


def test_a_role_without_sandboxclaims_fails_at_start_up_naming_the_rbac(monkeypatch, tmp_path):
    docs = [d for d in yaml.safe_load_all((MANIFESTS / "rbac.yaml").read_text()) if d]
    (role,) = [d for d in docs if d["kind"] == "Role"]
    role["rules"] = [r for r in role["rules"] if "sandboxclaims" not in r["resources"]]
    rbac = tmp_path / "rbac.yaml"
    rbac.write_text(yaml.safe_dump_all(docs))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with FakeAgentSandboxCluster(rbac=rbac) as cluster:
        monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig(tmp_path / "kubeconfig")))
        with pytest.raises(BackendUnavailable, match=r"forbidden .*rbac\.yaml.*\[403"):
            make_backend(settings(tmp_path, cluster.namespace))


def test_an_api_server_that_does_not_answer_fails_within_the_connect_timeout(monkeypatch, tmp_path):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # connections are queued, never answered
    try:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        config = tmp_path / "kubeconfig"
        config.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "current-context": "c",
                    "clusters": [{"name": "c", "cluster": {"server": url}}],
                    "users": [{"name": "u", "user": {"token": "t"}}],
                    "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                }
            )
        )
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        monkeypatch.setenv("KUBECONFIG", str(config))
        started = time.monotonic()
        with pytest.raises(BackendUnavailable, match="did not answer within 1 s"):
            make_backend(settings(tmp_path, "default", backend_connect_timeout_s=1.0))
        assert time.monotonic() - started < 5
    finally:
        silent.close()


def _template(cluster: FakeAgentSandboxCluster) -> dict:
    return cluster.objects[("sandboxtemplates", "analyst-env-sandbox")]


@pytest.mark.parametrize(
    "change, reason",
    [
        (lambda spec: spec.pop("networkPolicy"), "has no spec.networkPolicy"),
        (
            lambda spec: spec.update(
                networkPolicy={"egress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}]}
            ),
            "egress allows traffic out",
        ),
        (lambda spec: spec.update(networkPolicyManagement="Unmanaged"), "Unmanaged"),
    ],
    ids=["no-policy", "open-egress", "unmanaged"],
)
def test_a_template_whose_sandboxes_reach_the_network_is_refused(
    agent_sandbox_cluster, tmp_path, change, reason
):
    change(_template(agent_sandbox_cluster)["spec"])
    with pytest.raises(BackendUnavailable, match=f"refusing the SandboxTemplate .*{reason}"):
        make_backend(settings(tmp_path, agent_sandbox_cluster.namespace))
    assert agent_sandbox_cluster.claims() == []


def test_a_template_with_another_runner_revision_is_refused(agent_sandbox_cluster, tmp_path):
    (container,) = _template(agent_sandbox_cluster)["spec"]["podTemplate"]["spec"]["containers"]
    container["image"] = "registry.example/analyst-env:0123456789abcdef-r1"
    tag = artifact_tag(default_recipe())
    assert tag.endswith(f"-r{RUNNER_REVISION}")
    with pytest.raises(BackendUnavailable, match=f"needs one tagged '{tag}'"):
        make_backend(settings(tmp_path, agent_sandbox_cluster.namespace))


def test_a_missing_warm_pool_is_named(agent_sandbox_cluster, tmp_path):
    with pytest.raises(BackendUnavailable, match="no SandboxWarmPool 'nope' in namespace"):
        make_backend(
            settings(tmp_path, agent_sandbox_cluster.namespace, agent_sandbox_warm_pool="nope")
        )


def test_an_environment_image_needs_its_own_pool(agent_sandbox_cluster, tmp_path):
    from analyst_env.envs.recipes.recipe import Recipe

    backend = make_backend(settings(tmp_path, agent_sandbox_cluster.namespace))
    recipe = Recipe(name="extra", preload=["json"])
    try:
        with pytest.raises(
            SandboxError, match=f"no SandboxWarmPool 'analyst-env-{artifact_tag(recipe)}'"
        ):
            backend.baker().bake(
                recipe, tmp_path / "built", log=lambda line: None, progress=lambda f: None
            )
    finally:
        backend.close()


def test_a_pool_deleted_after_start_up_fails_the_claim_at_once(agent_sandbox_cluster, csv_file):
    backend = AgentSandboxBackend(
        resolve_default, namespace=agent_sandbox_cluster.namespace, pool=WarmPool(warm=0)
    )
    try:
        backend.warm_up("default")
        del agent_sandbox_cluster.objects[("sandboxwarmpools", "analyst-env-sandbox")]
        started = time.monotonic()
        with pytest.raises(SandboxError, match="could not claim a sandbox .*WarmPool"):
            backend.start("default", files={"data/sales.csv": csv_file})
        assert time.monotonic() - started < 10, "a terminal claim error must not wait 180 s"
    finally:
        backend.close()


def test_the_network_check_accepts_only_denied_egress():
    assert network_problem({"spec": {"networkPolicy": {}}}) is None
    assert network_problem({"spec": {"networkPolicy": {"ingress": [], "egress": []}}}) is None
    assert network_problem({"spec": {}}) is not None


def test_slots_made_at_once_do_not_disturb_each_others_api_calls(agent_sandbox_cluster, csv_file):
    # kubernetes.stream swaps the transport of the ApiClient it is given while it opens an
    # exec; other threads' calls on that client must not go out as WebSocket handshakes.
    backend = AgentSandboxBackend(
        resolve_default, namespace=agent_sandbox_cluster.namespace, pool=WarmPool(warm=0)
    )
    results: list[object] = []

    def episode() -> None:
        try:
            sandbox = backend.start("default", files={"data/sales.csv": csv_file})
            results.append(sandbox.run_cell("1+1", timeout_s=60).outputs)
            sandbox.close()
        except Exception as exc:  # reported below
            results.append(exc)

    try:
        threads = [threading.Thread(target=episode) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    finally:
        backend.close()
    assert results == [[{"text/plain": "2"}]] * 4


def test_a_sandbox_pod_lost_mid_cell_is_reported_and_the_backend_recovers(
    agent_sandbox_cluster, csv_file
):
    cluster = agent_sandbox_cluster
    backend = AgentSandboxBackend(
        resolve_default, namespace=cluster.namespace, pool=WarmPool(warm=0)
    )
    try:
        sandbox = backend.start("default", files={"sales.csv": csv_file})
        (claim,) = cluster.claims()
        (runner,) = cluster.processes[claim["status"]["sandbox"]["name"]]
        # The pod dies under the episode (evicted, OOM-killed): its exec stream ends.
        threading.Timer(1.0, os.killpg, (runner.pid, signal.SIGKILL)).start()
        with pytest.raises(SandboxError, match="is gone"):
            sandbox.run_cell("import time\ntime.sleep(30)", timeout_s=60)
        sandbox.close()
        fresh = backend.start("default", files={"sales.csv": csv_file})
        assert fresh.run_cell("open('sales.csv').readline()", timeout_s=20).outputs == [
            {"text/plain": "'region,amount\\n'"}
        ]
        fresh.close()
    finally:
        backend.close()


def test_a_role_without_pods_exec_fails_the_start_and_deletes_the_claim(
    monkeypatch, tmp_path, csv_file
):
    docs = [d for d in yaml.safe_load_all((MANIFESTS / "rbac.yaml").read_text()) if d]
    (role,) = [d for d in docs if d["kind"] == "Role"]
    role["rules"] = [r for r in role["rules"] if r["resources"] != ["pods/exec"]]
    rbac = tmp_path / "rbac.yaml"
    rbac.write_text(yaml.safe_dump_all(docs))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with FakeAgentSandboxCluster(rbac=rbac) as cluster:
        monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig(tmp_path / "kubeconfig")))
        backend = AgentSandboxBackend(
            resolve_default, namespace=cluster.namespace, pool=WarmPool(warm=0)
        )
        try:
            with pytest.raises(SandboxError, match=r"could not start the runner .*forbidden"):
                backend.start("default", files={"sales.csv": csv_file})
        finally:
            backend.close()
        assert cluster.claims() == []


@pytest.mark.live
def test_serve_on_the_fake_cluster_runs_and_scores_an_episode(agent_sandbox_cluster, tmp_path):
    import asyncio
    import json

    import httpx
    import websockets
    from server.serve_process import ServeProcess

    from analyst_env.datasets import load_dataset

    oracle = next(t for t in load_dataset("starter").tasks if t.id == "starter-sales-000")
    env = {"ANALYST_ENV_AGENT_SANDBOX_NAMESPACE": agent_sandbox_cluster.namespace}
    with ServeProcess(tmp_path, "--backend", "agent-sandbox", env=env) as server:
        health = httpx.get(f"{server.url}/health", timeout=30).json()
        assert health["sandbox"]["backend"] == "agent-sandbox"

        async def episode() -> list[dict]:
            frames = [
                {"type": "reset", "data": {"task_id": oracle.id}},
                {
                    "type": "step",
                    "data": {
                        "type": "call_tool",
                        "tool_name": "final_answer",
                        "arguments": {"answer": oracle.oracle_answer},
                    },
                },
            ]
            async with websockets.connect(server.url.replace("http", "ws") + "/ws") as ws:
                replies = []
                for frame in frames:
                    await ws.send(json.dumps(frame))
                    replies.append(json.loads(await asyncio.wait_for(ws.recv(), timeout=120)))
                return replies

        reset, answered = asyncio.run(episode())
    assert reset["data"]["observation"]["status"] == "ready", reset
    assert answered["data"]["reward"] == 1.0, answered
    assert any(verb == "exec" for verb, _, _ in agent_sandbox_cluster.requests)
