"""What is CoreWeave's own in the ``coreweave`` backend, against the fake CoreWeave API
(``fake_coreweave``) under the real ``cwsandbox`` SDK: the one-line refusals at start-up
(no key, no image, a wrong key), the options a slot's ``CreateSandbox`` carries (network
denied both ways, the recipe's sizing, a bounded lifetime, the tag) and that a slot
whose runner cannot start is deleted. The shared contract and parity run over
``backend_cases``."""

from __future__ import annotations

import pytest

pytest.importorskip("cwsandbox", reason="the coreweave extra is not installed")

from cwsandbox._proto import sandbox_pb2  # noqa: E402

from analyst_env.envs.remote.bounded import BackendUnavailable  # noqa: E402
from analyst_env.envs.remote.coreweave_backend import TAG, CoreWeaveSandboxBackend  # noqa: E402
from analyst_env.envs.remote.runner_image import resolve_default  # noqa: E402
from analyst_env.envs.sandbox import SandboxError  # noqa: E402

IMAGE = "registry.example/analyst-env-runner:test"


def _backend(fake, **options) -> CoreWeaveSandboxBackend:
    settings = {"api_key": fake.api_key, "image": IMAGE, "base_url": fake.base_url, "warm": 0}
    return CoreWeaveSandboxBackend(resolve_default, **{**settings, **options})


@pytest.mark.parametrize(
    "missing,named",
    [
        ({"api_key": None}, "needs CWSANDBOX_API_KEY:"),
        ({"image": None}, "needs ANALYST_ENV_COREWEAVE_IMAGE:"),
        ({"api_key": "", "image": ""}, "needs CWSANDBOX_API_KEY and ANALYST_ENV_COREWEAVE_IMAGE"),
    ],
)
def test_start_up_is_refused_in_one_line_naming_what_is_missing(coreweave_api, missing, named):
    with pytest.raises(BackendUnavailable, match=named) as refused:
        _backend(coreweave_api, **missing)
    assert "\n" not in str(refused.value)


def test_a_wrong_key_is_refused_at_start_up(coreweave_api):
    with pytest.raises(BackendUnavailable, match="refused the request") as refused:
        _backend(coreweave_api, api_key="wrong-key")
    assert "\n" not in str(refused.value) and coreweave_api.base_url in str(refused.value)


def test_a_slot_is_created_closed_to_the_network_sized_and_bounded(coreweave_api):
    backend = _backend(coreweave_api, cpus=2.0, memory_mb=3072, lifetime_s=1800)
    before = len(coreweave_api.created)
    try:
        sandbox = backend.start("default", files={}, seed=1)
        try:
            assert sandbox.run_cell("print(6 * 7)", timeout_s=30).stdout.strip() == "42"
        finally:
            sandbox.close()
    finally:
        backend.close()
    (request,) = coreweave_api.created[before:]
    spec = request.sandbox.spec
    assert (spec.network.deny_egress, spec.network.deny_ingress) == (True, True)
    assert spec.max_lifetime_seconds == 1800
    assert TAG in spec.tags and f"{TAG}-image-default" in spec.tags
    (container,) = spec.containers
    assert container.image == IMAGE
    limits = container.resource_requirements.limits
    requests = container.resource_requirements.requests
    assert (limits.cpu, limits.memory) == ("2000m", "3072Mi")
    assert (requests.cpu, requests.memory) == ("2000m", "3072Mi")


def test_a_slot_whose_runner_cannot_start_is_deleted(coreweave_api):
    backend = _backend(coreweave_api)
    backend._bundle = b"not a tar archive"  # what a truncated upload would leave
    before = set(coreweave_api.sandboxes)
    try:
        with pytest.raises(SandboxError, match="unpacking the runner failed"):
            backend.start("default", files={}, seed=1)
    finally:
        backend.close()
    (made,) = set(coreweave_api.sandboxes) - before
    assert made not in coreweave_api.folders  # its folder is gone with its processes
    assert coreweave_api.sandboxes[made].status.state == sandbox_pb2.STATE_TERMINATED


def test_the_runner_outlives_the_sdks_request_timeout(coreweave_api):
    """The SDK ends an exec after ``request_timeout_seconds`` unless the exec says otherwise;
    the runner's exec must last as long as its sandbox."""
    backend = _backend(coreweave_api, request_timeout_s=3.0)
    try:
        sandbox = backend.start("default", files={}, seed=1)
        try:
            sandbox.run_cell("import time; time.sleep(5)", timeout_s=30)
            assert sandbox.run_cell("print('still here')", timeout_s=30).stdout.strip() == (
                "still here"
            )
        finally:
            sandbox.close()
    finally:
        backend.close()
