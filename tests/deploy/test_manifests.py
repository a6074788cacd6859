"""The deployment files in ``deploy/`` are valid and agree with the server they deploy.

Kubernetes manifests are checked offline against the API schemas bundled in
``kubernetes-validate`` (strict: an unknown or misspelt field fails), and beyond the
schema against the server itself: every ``ANALYST_ENV_*`` variable is a real setting,
the probes use the routes that need no token, the grace period covers the drain, the
HPA scales on a metric ``/metrics`` serves. The compose file gets the same setting
check, and its HAProxy configuration is checked by ``haproxy -c`` when installed.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import kubernetes_validate
import pytest
import yaml

from analyst_env.server.auth import OPEN_PATHS
from analyst_env.server.metrics import server_gauges
from analyst_env.server.settings import Settings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
K8S_VERSION = "1.37.0"
MANIFESTS = sorted(p for p in KUBERNETES.glob("*.yaml") if p.name != "kustomization.yaml")
DEPLOYMENTS = ["deployment.yaml", "deployment-remote.yaml"]


def documents(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def setting_names() -> set[str]:
    return {f"ANALYST_ENV_{name.upper()}" for name in Settings.model_fields}


def server_container(name: str) -> dict:
    (deployment,) = documents(KUBERNETES / name)
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_every_manifest_is_valid_against_the_kubernetes_schema(path):
    docs = documents(path)
    assert docs
    for doc in docs:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_a_misspelt_field_is_caught_by_the_validation():
    (deployment,) = documents(KUBERNETES / "deployment.yaml")
    deployment["spec"]["template"]["spec"]["terminationGracePeriod"] = 60
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, K8S_VERSION, strict=True)


def test_kustomization_lists_existing_files_and_one_deployment():
    (kustomization,) = documents(KUBERNETES / "kustomization.yaml")
    resources = kustomization["resources"]
    assert all((KUBERNETES / r).is_file() for r in resources)
    assert sum(r.startswith("deployment") for r in resources) == 1


@pytest.mark.parametrize("name", DEPLOYMENTS)
def test_deployment_env_names_are_settings_of_the_server(name):
    env = {e["name"] for e in server_container(name)["env"]}
    ours = {n for n in env if n.startswith("ANALYST_ENV_")}
    assert ours - setting_names() == set()
    assert "ANALYST_ENV_TOKEN" in ours, "a pod listens on 0.0.0.0: serve refuses it without a token"
    values = {e["name"]: e.get("value") for e in server_container(name)["env"]}
    Settings.from_env({k: v for k, v in values.items() if k in ours and v is not None})


@pytest.mark.parametrize("name", DEPLOYMENTS)
def test_probes_need_no_token_and_the_grace_period_covers_the_drain(name):
    container = server_container(name)
    assert container["readinessProbe"]["httpGet"]["path"] == "/ready"
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert container[probe]["httpGet"]["path"] in OPEN_PATHS
    (deployment,) = documents(KUBERNETES / name)
    grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    drain = float(env["ANALYST_ENV_DRAIN_TIMEOUT_S"])
    pre_stop = float(container["lifecycle"]["preStop"]["exec"]["command"][1])
    assert grace > pre_stop + drain


def test_local_sandbox_deployment_grants_what_full_isolation_needs():
    context = server_container("deployment.yaml")["securityContext"]
    assert context["runAsUser"] == 0
    assert {"SYS_ADMIN", "NET_ADMIN"} <= set(context["capabilities"]["add"])
    assert context["seccompProfile"]["type"] == "Unconfined"
    mounts = {m["mountPath"] for m in server_container("deployment.yaml")["volumeMounts"]}
    from analyst_env.envs.local.uid_ranges import LOCK_DIR

    assert LOCK_DIR in mounts, "pods on one node must share the uid-range locks"


def test_remote_deployment_meets_the_restricted_pod_security_profile():
    (deployment,) = documents(KUBERNETES / "deployment-remote.yaml")
    pod = deployment["spec"]["template"]["spec"]
    container = server_container("deployment-remote.yaml")
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert "hostPath" not in str(pod["volumes"])
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["ANALYST_ENV_BACKEND"] in ("modal", "e2b", "docker")


def test_hpa_scales_on_a_gauge_the_server_exports():
    (hpa,) = documents(KUBERNETES / "hpa.yaml")
    metric = hpa["spec"]["metrics"][0]["pods"]["metric"]["name"]
    app = SimpleNamespace(
        state=SimpleNamespace(
            sessions={"a": None, "b": None},
            sockets=SimpleNamespace(in_flight=0, draining=False),
        )
    )
    runtime = SimpleNamespace(
        settings=Settings(max_sessions=256),
        backend=SimpleNamespace(),  # a backend keeping no pool and no orders (no KeepsStandbys)
        environments=None,  # no /envs mounted
    )
    exported = {family.name: family for family in server_gauges(app, runtime)()}
    assert exported[metric].samples[0].value == 2
    target = float(hpa["spec"]["metrics"][0]["pods"]["target"]["averageValue"])
    env = {e["name"]: e.get("value") for e in server_container("deployment.yaml")["env"]}
    max_sessions = float(env["ANALYST_ENV_MAX_SESSIONS"])
    assert 0 < target < max_sessions, "scale out before pods answer 'full'"


def test_compose_replicas_use_real_settings_and_drain_before_being_killed():
    compose = yaml.safe_load((DEPLOY / "compose" / "compose.yaml").read_text())
    server = compose["services"]["analyst-env"]
    assert set(server["environment"]) - setting_names() == set()
    assert server["deploy"]["replicas"] >= 2
    grace = float(server["stop_grace_period"].rstrip("s"))
    assert grace > float(server["environment"]["ANALYST_ENV_DRAIN_TIMEOUT_S"])
    from analyst_env.envs.local.uid_ranges import LOCK_DIR

    assert any(v.endswith(":" + LOCK_DIR) for v in server["volumes"])
    balancer = compose["services"]["balancer"]
    assert any(v.startswith("./haproxy.cfg:") for v in balancer["volumes"])


@pytest.mark.skipif(
    shutil.which("haproxy") is None, reason="haproxy is not installed (.ci/run installs it)"
)
def test_haproxy_configuration_is_accepted_by_haproxy():
    checked = subprocess.run(
        ["haproxy", "-c", "-f", str(DEPLOY / "compose" / "haproxy.cfg")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    cfg = (DEPLOY / "compose" / "haproxy.cfg").read_text()
    assert "option httpchk GET /ready" in cfg and "/ready" in OPEN_PATHS
