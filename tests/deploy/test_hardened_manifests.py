"""The deployment files run the image with a read-only root, and give it what it writes.

The image writes only its state directory, /tmp and (isolation full) the uid-range
locks (Dockerfile, docs/publishing.md; tests/image/test_hardened_image.py runs it so).
Every Kubernetes deployment and the compose service must therefore make the root
filesystem read-only and mount those paths, or the pod would crash at start-up (issue 32,
item 7). Checked against the Dockerfile itself, so a moved state directory or user shows.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from analyst_env.envs.local.uid_ranges import LOCK_DIR

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES = ROOT / "deploy" / "kubernetes"
DEPLOYMENTS = ["deployment.yaml", "deployment-remote.yaml"]


def dockerfile() -> str:
    return (ROOT / "Dockerfile").read_text()


def state_dir() -> str:
    (value,) = re.findall(r"ANALYST_ENV_STATE_DIR=(\S+)", dockerfile())
    return value


def image_uid() -> int:
    (uid,) = re.findall(r"useradd --uid (\d+)", dockerfile())
    return int(uid)


def pod_spec(name: str) -> dict:
    (deployment,) = [d for d in yaml.safe_load_all((KUBERNETES / name).read_text()) if d]
    return deployment["spec"]["template"]["spec"]


def test_the_state_directory_is_a_declared_volume_of_the_image():
    volumes = re.findall(r'^VOLUME \["([^"]+)"\]', dockerfile(), re.MULTILINE)
    assert volumes == [state_dir()]


@pytest.mark.parametrize("name", DEPLOYMENTS)
def test_deployments_have_a_read_only_root_and_volumes_for_what_the_server_writes(name):
    pod = pod_spec(name)
    (container,) = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounted = {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"]}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env.get("ANALYST_ENV_STATE_DIR", state_dir()) == state_dir()
    for path in ("/tmp", state_dir()):
        assert path in mounted, f"{name}: nothing writable is mounted at {path}"
        assert mounted[path].keys() & {"emptyDir", "persistentVolumeClaim"}, mounted[path]
    if container["securityContext"].get("runAsUser") == 0:  # isolation full: uid locks
        assert LOCK_DIR in mounted


def test_the_restricted_deployment_runs_as_the_image_user():
    pod = pod_spec("deployment-remote.yaml")
    assert pod["securityContext"]["runAsUser"] == image_uid()
    assert pod["securityContext"]["fsGroup"] == image_uid(), "the state volume must be its"


def test_compose_replicas_have_a_read_only_root_with_tmp_and_the_locks_writable():
    compose = yaml.safe_load((ROOT / "deploy" / "compose" / "compose.yaml").read_text())
    server = compose["services"]["analyst-env"]
    assert server["read_only"] is True
    assert "/tmp" in server["tmpfs"]
    assert any(v.endswith(":" + LOCK_DIR) for v in server["volumes"])
