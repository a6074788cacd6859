"""``deploy/kubernetes/agent-sandbox/`` is valid and agrees with the server and backend it deploys.

Built-in kinds are checked offline against ``kubernetes-validate``'s bundled schemas, the
Agent Sandbox kinds against the CRD schemas vendored from kubernetes-sigs/agent-sandbox
(``agent_sandbox_schemas/``), both strictly (a misspelt field fails). Beyond the schemas:
the template runs the image the default recipe's runner needs with no network, the pool
is the one the server claims from, and the server's service account is the one the Role
is bound to. (That the Role grants enough is shown by the backend tests: the fake API
server allows only what this Role grants.)
"""

from __future__ import annotations

import sys
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from analyst_env.envs.remote.agent_sandbox_backend import network_problem, template_images
from analyst_env.envs.remote.runner_image import artifact_tag, default_recipe
from analyst_env.server.auth import OPEN_PATHS
from analyst_env.server.settings import Settings

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "agent_sandbox_schemas"))
import crd_validation  # noqa: E402

DIR = HERE.parents[1] / "deploy" / "kubernetes" / "agent-sandbox"
K8S_VERSION = "1.37.0"
FILES = sorted(p for p in DIR.glob("*.yaml") if p.name != "kustomization.yaml")


def documents(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((DIR / name).read_text()) if d]


def one(kind: str) -> dict:
    (doc,) = [d for p in FILES for d in documents(p.name) if d["kind"] == kind]
    return doc


def server_container() -> dict:
    (container,) = one("Deployment")["spec"]["template"]["spec"]["containers"]
    return container


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_object_is_valid_against_its_schema(path):
    for doc in documents(path.name):
        if doc["kind"] in crd_validation.kinds():
            crd_validation.validate(doc)
        else:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_a_misspelt_template_field_is_caught():
    template = one("SandboxTemplate")
    template["spec"]["podTemplate"]["spec"]["runtimeClass"] = "gvisor"
    with pytest.raises(jsonschema.ValidationError):
        crd_validation.validate(template)


def test_kustomization_lists_every_file_and_one_namespace():
    (kustomization,) = documents("kustomization.yaml")
    assert sorted(kustomization["resources"]) == [p.name for p in FILES]
    (binding,) = [d for d in documents("rbac.yaml") if d["kind"] == "RoleBinding"]
    assert {s["namespace"] for s in binding["subjects"]} == {kustomization["namespace"]}


def test_the_template_runs_the_default_image_without_network():
    template = one("SandboxTemplate")
    tag = artifact_tag(default_recipe())
    assert [image.rsplit(":", 1)[1] for image in template_images(template)] == [tag], (
        "the template must run the default recipe's image of this runner revision"
    )
    assert network_problem(template) is None
    pod = template["spec"]["podTemplate"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert {m["mountPath"] for m in container["volumeMounts"]} == {"/work", "/tmp"}
    assert "memory" in container["resources"]["limits"]


def test_the_server_claims_from_the_shipped_pool_with_the_bound_service_account():
    pool = one("SandboxWarmPool")
    assert pool["spec"]["sandboxTemplateRef"]["name"] == one("SandboxTemplate")["metadata"]["name"]
    env = {e["name"]: e.get("value") for e in server_container()["env"]}
    assert env["ANALYST_ENV_BACKEND"] == "agent-sandbox"
    assert env["ANALYST_ENV_AGENT_SANDBOX_WARM_POOL"] == pool["metadata"]["name"]
    assert Settings().agent_sandbox_warm_pool == pool["metadata"]["name"]
    pod = one("Deployment")["spec"]["template"]["spec"]
    binding = one("RoleBinding")
    assert binding["roleRef"]["name"] == one("Role")["metadata"]["name"]
    assert [s["name"] for s in binding["subjects"]] == [pod["serviceAccountName"]]
    assert pod["serviceAccountName"] == one("ServiceAccount")["metadata"]["name"]


def test_the_role_grants_no_more_than_the_backend_uses():
    granted = {
        (group, resource, verb)
        for rule in one("Role")["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    assert not any("*" in item for entry in granted for item in entry)
    assert {r for _, r, _ in granted} == {
        "sandboxclaims",
        "sandboxwarmpools",
        "sandboxtemplates",
        "sandboxes",
        "pods/exec",
    }


def test_the_server_deployment_uses_real_settings_and_open_probes():
    container = server_container()
    ours = {e["name"]: e.get("value") for e in container["env"] if e["name"].startswith("ANALYST_")}
    assert set(ours) <= {f"ANALYST_ENV_{n.upper()}" for n in Settings.model_fields}
    assert "ANALYST_ENV_TOKEN" in ours
    Settings.from_env({k: v for k, v in ours.items() if v is not None})
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert container[probe]["httpGet"]["path"] in OPEN_PATHS
    pod = one("Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
