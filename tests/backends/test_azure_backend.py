"""What the azure backend adds to the contract suites: its refusals, and the spool it runs on.

The contract, verifier and parity suites run the backend on the fake data plane
(``fake_azure``) through the real SDK; these check the rest: a disk image Azure failed to
build refuses its episodes with Azure's reason and is not rebuilt, missing settings are one
line naming them, and ``spool_relay`` (run here as real processes) keeps the runner's input
open across writers, delivers a retried push once and reports the runner's exit after its
last output.
"""

from __future__ import annotations

import base64
import subprocess
import sys

import pytest

from analyst_env.envs.recipes.recipe import Recipe
from analyst_env.envs.remote.bounded import BackendUnavailable
from analyst_env.envs.remote.options import WarmPool
from analyst_env.envs.sandbox import SandboxError


def test_a_failed_disk_image_is_refused_with_its_reason_and_not_rebuilt(azure_api):
    pytest.importorskip("azure.containerapps.sandbox")
    from analyst_env.envs.remote.azure_backend import AzureSandboxBackend

    recipe = Recipe(name="broken", pip=["no-such-package-x"])
    backend = AzureSandboxBackend(
        lambda image: recipe, **azure_api.backend_options(), pool=WarmPool(warm=0)
    )
    azure_api.faults.build_failure = "manifest unknown"
    try:
        for _ in range(2):
            with pytest.raises(SandboxError, match=r"failed to build \(manifest unknown\)"):
                backend.start("env-broken", files={})
    finally:
        azure_api.faults.build_failure = None
        backend.close()
    made = [
        image
        for image in azure_api.images.values()
        if image["labels"]["name"] == backend.artifact_name(recipe)
    ]
    assert len(made) == 1
    assert made[0]["image"]["base"] == backend.image_reference(recipe)
    assert made[0]["image"]["base"].startswith("registry.example/team/analyst-env:")


def test_missing_settings_are_one_line_naming_them():
    from analyst_env.envs.remote.azure_backend import settings_from_env

    with pytest.raises(BackendUnavailable) as refused:
        settings_from_env({"AZURE_SUBSCRIPTION_ID": "s", "AZURE_REGION": "westus2"})
    message = str(refused.value)
    assert "\n" not in message
    assert "AZURE_RESOURCE_GROUP, AZURE_SANDBOX_GROUP, AZURE_SANDBOX_REGISTRY" in message
    assert "AZURE_REGION" not in message.split("set ")[1].split(" (the token")[0]
    found = settings_from_env(
        {
            "AZURE_SUBSCRIPTION_ID": "s",
            "AZURE_RESOURCE_GROUP": "rg",
            "AZURE_SANDBOX_GROUP": "g",
            "AZURE_SANDBOX_REGISTRY": "r.example",
            "AZURE_REGION": "westus2",
        }
    )
    assert found["endpoint"] == "https://management.westus2.azuredevcompute.io"


def _relay(*args: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "analyst_env.envs.remote.spool_relay", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


def _pull(spool: str, offset: int) -> str:
    return _relay("pull", spool, str(offset), "10").stdout.strip()


def test_the_spool_keeps_input_open_delivers_once_and_reports_the_exit(tmp_path):
    spool = str(tmp_path / "spool")
    # The "runner" echoes two lines, then exits 7: its input must survive the first writer.
    script = (
        "import sys\n"
        "for _ in range(2): print(sys.stdin.readline().strip().upper(), flush=True)\n"
        "sys.exit(7)"
    )
    serve = subprocess.Popen(
        [sys.executable, "-m", "analyst_env.envs.remote.spool_relay", "serve", spool, "--",
         sys.executable, "-c", script],
    )  # fmt: skip
    try:
        (tmp_path / "spool").mkdir(exist_ok=True)
        for number, text in enumerate([b"one\n", b"two\n"]):
            (tmp_path / "spool" / f"msg-{number}").write_bytes(text)
            assert _relay("push", spool, str(number)).returncode == 0
            assert _relay("push", spool, str(number)).returncode == 0  # a retried request
        received = b""
        while len(received) < len(b"ONE\nTWO\n"):
            line = _pull(spool, len(received))
            assert not line.startswith("!exit"), (line, received)
            received += base64.b64decode(line)
        assert received == b"ONE\nTWO\n"
        assert serve.wait(timeout=30) == 7
        assert _pull(spool, len(received)) == "!exit 7"
        (tmp_path / "spool" / "msg-9").write_bytes(b"late\n")
        gone = _relay("push", spool, "9")
        assert gone.returncode == 1 and "the runner is gone" in gone.stderr
    finally:
        serve.kill()
        serve.wait()
