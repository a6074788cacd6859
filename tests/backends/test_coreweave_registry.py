"""Recipe images on the coreweave backend: built on a real Docker engine, pushed to a real
registry (Debian's ``docker-registry`` on a loopback port), run by the fake CoreWeave API.

Opt-in like the Docker backend's live tests (``ANALYST_ENV_TEST_DOCKER=1``, with
``ANALYST_ENV_TEST_DOCKER_BUILD_NETWORK=host`` for an engine without a bridge); CI turns it
on (``.ci/run``) and installs ``docker-registry``. The engine pushes over plain HTTP because
it trusts registries on 127.0.0.0/8 as insecure by default.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request

import pytest
from relayed_episode import assert_the_uploaded_runner_serves

from analyst_env.envs.recipes.recipe import IMAGE_PREFIX, Recipe
from analyst_env.envs.remote.options import WarmPool
from analyst_env.envs.remote.runner_image import artifact_tag

REGISTRY = "/usr/bin/docker-registry"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def engine_host():
    """``DOCKER_HOST`` of an engine that answers, or a skip saying what is missing."""
    if os.environ.get("ANALYST_ENV_TEST_DOCKER") != "1":
        pytest.skip("needs a Docker engine: set ANALYST_ENV_TEST_DOCKER=1 to run")
    docker = pytest.importorskip("docker", reason="the docker extra is not installed")
    host = os.environ.get("DOCKER_HOST") or None
    try:
        client = docker.DockerClient(base_url=host) if host else docker.from_env()
        client.ping()
        client.close()
    except Exception as exc:
        pytest.skip(f"no Docker engine answers at {host or 'the default socket'}: {exc}")
    return host


@pytest.fixture
def registry(tmp_path):
    """``127.0.0.1:<port>``: a docker-registry serving from a storage folder in ``tmp_path``."""
    if not os.access(REGISTRY, os.X_OK):
        pytest.skip("no docker-registry (apt-get install docker-registry)")
    port = _free_port()
    config = tmp_path / "registry.yml"
    config.write_text(
        "version: 0.1\n"
        "log:\n  level: warn\n"
        f"storage:\n  filesystem:\n    rootdirectory: {tmp_path / 'storage'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
    )
    proc = subprocess.Popen(
        [REGISTRY, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(f"http://{address}/v2/", timeout=2).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "no registry"
                time.sleep(0.1)
        yield address
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(tmp_path / "storage", ignore_errors=True)


def test_a_baked_recipe_is_pushed_and_its_sandboxes_run_the_pushed_reference(
    engine_host, registry, coreweave_api, tmp_path, csv_file
):
    import docker

    from analyst_env.envs.remote.coreweave_backend import CoreWeaveSandboxBackend

    recipe = Recipe(name="tiny", preload=["json"])
    image = IMAGE_PREFIX + recipe.content_hash()
    repository = f"{registry}/analyst-env/runners"
    reference = f"{repository}:{artifact_tag(recipe)}"
    backend = CoreWeaveSandboxBackend(
        {image: recipe}.get,
        api_key=coreweave_api.api_key,
        base_url=coreweave_api.base_url,
        image_repository=repository,
        docker_host=engine_host,
        build_network=os.environ.get("ANALYST_ENV_TEST_DOCKER_BUILD_NETWORK"),
        pool=WarmPool(warm=0),
    )
    lines: list[str] = []
    try:
        backend.bake(recipe, tmp_path / "out", log=lines.append, progress=lambda _: None)
        assert lines[-1] == f"coreweave: {reference} is ready"
        with urllib.request.urlopen(
            f"http://{registry}/v2/analyst-env/runners/tags/list", timeout=10
        ) as reply:
            assert json.load(reply)["tags"] == [artifact_tag(recipe)]
        sandbox = backend.start(image, files={"data/sales.csv": csv_file}, env={"K": "v"})
        assert coreweave_api.created()[-1]["spec"]["containers"][0]["image"] == reference
        (folder,) = coreweave_api.folders()
        assert_the_uploaded_runner_serves(sandbox, os.path.join(coreweave_api.root, folder))
        sandbox.close()
    finally:
        backend.close()
        client = docker.DockerClient(base_url=engine_host) if engine_host else docker.from_env()
        try:
            client.images.remove(reference, force=True)
        except docker.errors.ImageNotFound:
            pass
        client.close()
