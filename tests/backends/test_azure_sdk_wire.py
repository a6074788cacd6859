"""The real ``azure-containerapps-sandbox`` SDK against the loopback fake of its data plane.

These pin what the backend relies on, through the vendor's own code: a sandbox created
from a disk image under a deny-all egress policy reaches ``Running`` through the SDK's
poller; ``exec`` answers when the command ends, while a command detached from it keeps
running (the spooled runner depends on that); files go both ways as bytes; a disk image
goes through its states to ``Ready``, or to ``Failed`` with the reason; a wrong token is
refused.
"""

from __future__ import annotations

import time

import pytest

sandbox_sdk = pytest.importorskip("azure.containerapps.sandbox")


def _group(fake, credential=None):
    return sandbox_sdk.SandboxGroupClient(
        fake.endpoint,
        credential or fake.credential(),
        subscription_id=fake.subscription,
        resource_group=fake.resource_group,
        sandbox_group=fake.group,
    )


def test_sandbox_exec_files_and_a_detached_process(azure_api):
    group = _group(azure_api)
    poller = group.begin_create_sandbox(
        disk="ubuntu",
        cpu="500m",
        memory="1024Mi",
        egress_policy=sandbox_sdk.EgressPolicy(default_action="Deny"),
        labels={"app": "analyst-env"},
        polling_interval=0.05,
    )
    sandbox = poller.result()
    try:
        puts = [(path, params) for method, path, params in azure_api.requests if method == "PUT"]
        path, params = puts[-1]
        assert params["api-version"] == "2026-02-01-preview"
        assert path == "/subscriptions/sub-1/resourceGroups/rg-1/sandboxGroups/group-1/sandboxes"
        created = azure_api.sandboxes[sandbox.sandbox_id]
        assert created["egressPolicy"] == {"defaultAction": "Deny"}
        assert created["resources"] == {"cpu": "500m", "memory": "1024Mi"}

        result = sandbox.exec("echo out; echo err >&2; exit 3")
        assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")

        sandbox.write_file("/tmp/spool/data.bin", b"\x00\xffbytes")
        assert sandbox.read_file("/tmp/spool/data.bin") == b"\x00\xffbytes"
        assert sandbox.exec("wc -c < /tmp/spool/data.bin").stdout.strip() == "7"

        started = time.monotonic()
        detached = sandbox.exec(
            "setsid nohup sh -c 'sleep 5; echo later > /tmp/spool/late' >/dev/null 2>&1 &"
        )
        # an exec that waited for the detached child would take the child's 5 s
        assert detached.exit_code == 0 and time.monotonic() - started < 4
        deadline = time.monotonic() + 20
        while sandbox.exec("cat /tmp/spool/late").stdout != "later\n":
            assert time.monotonic() < deadline, "the detached command did not outlive its exec"
            time.sleep(0.1)
    finally:
        sandbox.delete()
    assert sandbox.sandbox_id not in azure_api.sandboxes


def test_disk_image_states_and_failure_reason(azure_api):
    group = _group(azure_api)
    image = group.begin_create_disk_image(
        "registry.example/analyst-env:abc-r1", name="analyst-env-abc-r1", polling_interval=0.05
    ).result()
    assert image.status.state == "Ready" and image.labels == {"name": "analyst-env-abc-r1"}
    assert image.id in [found.id for found in group.list_disk_images()]

    azure_api.faults.build_failure = "manifest unknown"
    try:
        with pytest.raises(RuntimeError, match="terminal state .failed."):
            group.begin_create_disk_image("registry.example/gone:1", polling_interval=0.05).result()
    finally:
        azure_api.faults.build_failure = None
    failed = [i for i in group.list_disk_images() if i.status.state == "Failed"]
    assert failed and failed[-1].status.message == "manifest unknown"


def test_a_wrong_token_is_refused(azure_api):
    import fake_azure
    from azure.core.exceptions import ClientAuthenticationError

    group = _group(azure_api, fake_azure.StaticToken("not-the-token"))
    with pytest.raises(ClientAuthenticationError):
        group.get_sandbox("sbx-none")
