"""The coreweave backend through the unmodified ``cwsandbox`` SDK against a fake gRPC API.

The SDK runs only in the backend's agent process and the fake in a process of its own
(``fake_coreweave_process``), so ``grpc`` is never imported here: a verifier's forked scoring
child inherits no lock of gRPC's threads. The slot runner really runs, from the code the
backend uploads, behind ``line_relay``, fed through the SDK's ``exec(stdin=True)``.
"""

from __future__ import annotations

import os
import sys

import pytest
from relayed_episode import assert_the_uploaded_runner_serves, wait_for

from analyst_env.envs.recipes.recipe import Recipe
from analyst_env.envs.remote.bounded import BackendUnavailable
from analyst_env.envs.remote.options import Sizing, Timeouts, WarmPool
from analyst_env.envs.remote.runner_image import resolve_default
from analyst_env.envs.sandbox import SandboxError
from analyst_env.task_format import VerifierSpec
from analyst_env.verifiers import Verdict, register
from analyst_env.verifiers.bounded import ScoringLimits, score_bounded

IMAGE = "registry.example/analyst-env-runner:3.12"


def _backend(fake, resolve=resolve_default, **kwargs):
    from analyst_env.envs.remote.coreweave_backend import CoreWeaveSandboxBackend

    options = {"image": IMAGE, "pool": WarmPool(warm=0), **kwargs}
    return CoreWeaveSandboxBackend(resolve, api_key=fake.api_key, base_url=fake.base_url, **options)


@pytest.fixture
def backend(coreweave_api):
    b = _backend(coreweave_api)
    yield b
    b.close()


def _folder(fake, sandbox) -> str:
    (name,) = [n for n in fake.folders() if sandbox.label.endswith(n.removeprefix("sandbox-"))]
    return os.path.join(fake.root, name)


def test_an_episode_runs_the_uploaded_runner_in_a_sandbox_that_denies_the_network(
    backend, coreweave_api, csv_file
):
    sandbox = backend.start("default", files={"data/sales.csv": csv_file}, seed=5, env={"K": "v"})
    root = _folder(coreweave_api, sandbox)
    assert_the_uploaded_runner_serves(sandbox, root)
    spec = coreweave_api.created()[-1]["spec"]
    assert spec["network"] == {"denyEgress": True, "denyIngress": True}
    assert spec["containers"][0]["image"] == IMAGE and spec["maxLifetimeSeconds"] == 3600
    sandbox.close()  # with no warm slot wanted, the sandbox is deleted in the background
    assert wait_for(lambda: not os.path.exists(root))


@register("coreweave_test_where")
def _where(submitted, gold):
    return Verdict(1.0, {}, str(os.getpid()))


def test_grpc_never_enters_this_process_and_forked_scoring_still_answers(backend):
    sandbox = backend.start("default", files={})
    assert sandbox.run_cell("21 * 2", timeout_s=30).outputs == [{"text/plain": "42"}]
    assert "grpc" not in sys.modules and "cwsandbox" not in sys.modules
    # A scorer registered only here is scored in a child forked from this process, while the
    # backend's threads and its agent's pipes are live: it must answer, not hang.
    verdict = score_bounded(
        VerifierSpec(name="coreweave_test_where"), {"a": 1}, None, ScoringLimits(timeout_s=20)
    )
    assert verdict.reward == 1.0 and verdict.detail != str(os.getpid())
    sandbox.close()


def test_sizing_becomes_the_sandboxs_limits(coreweave_api):
    b = _backend(coreweave_api, sizing=Sizing(cpus=1.5, memory_mb=3000))
    try:
        b.start("default", files={}).close()
        limits = coreweave_api.created()[-1]["spec"]["containers"][0]["resourceRequirements"]
        assert limits["limits"] == {"cpu": "1.5", "memory": "3000Mi"}
    finally:
        b.close()


def test_missing_credentials_are_one_line_refusals():
    from analyst_env.envs.remote.coreweave_backend import CoreWeaveSandboxBackend

    with pytest.raises(BackendUnavailable, match="needs credentials: set CWSANDBOX_API_KEY"):
        CoreWeaveSandboxBackend(resolve_default, api_key=None)


def test_a_wrong_key_stops_the_server_at_start(coreweave_api):
    from analyst_env.envs.remote.coreweave_backend import CoreWeaveSandboxBackend

    with pytest.raises(BackendUnavailable, match="refused the request: .*Authentication failed"):
        CoreWeaveSandboxBackend(resolve_default, api_key="wrong", base_url=coreweave_api.base_url)


def test_a_recipe_image_and_a_missing_image_are_refused_with_what_to_do(coreweave_api):
    recipe = Recipe(name="geo", pip=["shapely"])
    b = _backend(coreweave_api, {"env-geo": recipe, "default": resolve_default("default")}.get)
    try:
        with pytest.raises(
            SandboxError, match="runs only the default image: .*ANALYST_ENV_COREWEAVE_IMAGE_REPO"
        ):
            b.start("env-geo", files={})
    finally:
        b.close()
    b = _backend(coreweave_api, image=None)
    try:
        with pytest.raises(SandboxError, match="set ANALYST_ENV_COREWEAVE_IMAGE"):
            b.start("default", files={})
    finally:
        b.close()


def test_a_repository_without_a_docker_engine_stops_the_server_naming_docker_host(
    coreweave_api, tmp_path
):
    pytest.importorskip("docker", reason="the docker extra is not installed")
    with pytest.raises(BackendUnavailable, match=r"none answers at unix://.*set DOCKER_HOST") as e:
        _backend(
            coreweave_api,
            image_repository="127.0.0.1:5000/analyst-env",
            docker_host=f"unix://{tmp_path}/no-docker.sock",
            timeouts=Timeouts(connect_s=2),
        )
    assert "\n" not in str(e.value)
