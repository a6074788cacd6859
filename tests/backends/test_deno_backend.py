"""The Deno backend through the unmodified ``deno-sandbox`` SDK against a fake of Deno's APIs.

``fake_deno`` serves the sandbox WebSocket (JSON-RPC ``spawn``/``processWait``/``processKill``
with byte streams) and ``fake_deno_console`` the volumes and snapshots, with shapes from the
SDK's source; processes really run, so the slot runner starts from the archive the backend
sends and answers through the FIFO path of ``deno_link``.
"""

from __future__ import annotations

import os
import threading
import time

import pytest

from analyst_env.envs.recipes.recipe import Recipe
from analyst_env.envs.remote.bounded import BackendUnavailable
from analyst_env.envs.remote.options import Timeouts, WarmPool
from analyst_env.envs.remote.runner_image import resolve_default
from analyst_env.envs.remote.slots import Slot
from analyst_env.envs.sandbox import SandboxError

pytest.importorskip("deno_sandbox", reason="the deno extra is not installed")

from analyst_env.envs.remote.deno_backend import DenoSandboxBackend  # noqa: E402


def _backend(fake, resolve=resolve_default, **kwargs) -> DenoSandboxBackend:
    return DenoSandboxBackend(resolve, token=fake.token, pool=WarmPool(warm=0), **kwargs)


def test_an_episode_runs_in_a_sandbox_booted_from_the_recipes_snapshot(deno_api, csv_file):
    backend = _backend(deno_api)
    before = set(deno_api.live)
    try:
        sandbox = backend.start(
            "default", files={"data/sales.csv": csv_file}, seed=5, env={"K": "v"}
        )
        result = sandbox.run_cell(
            "import os, pandas as pd\nprint(os.environ['K'])\n"
            "pd.read_csv('data/sales.csv').groupby('region').amount.sum()",
            timeout_s=30,
        )
        assert result.error is None, result.error
        assert result.stdout == "v\n" and "west    12.0" in result.outputs[0]["text/plain"]
        assert sandbox.run_shell("wc -l < data/sales.csv", timeout_s=20).stdout.strip() == "4"
        blob = os.urandom(300_000)  # a frame of many 64 KiB stream pieces, both ways
        sandbox.put_file("blob.bin", blob)
        assert sandbox.get_file("blob.bin") == blob
        name = backend.artifact_name(resolve_default("default"))
        assert deno_api.console.find(deno_api.console.snapshots, name) is not None
        assert not deno_api.console.find(deno_api.console.volumes, f"{name}-build")
        ((slot_id, slot),) = [(k, c) for k, c in deno_api.live.items() if k not in before]
        assert slot == {**slot, "root": {"volume": name}, "allow_net": [], "memory_mb": 2048}
        sandbox.close()  # no warm slot wanted: the sandbox's socket closes, the microVM ends
        deadline = time.monotonic() + 20
        while slot_id in deno_api.live:
            assert time.monotonic() < deadline, "the sandbox was not ended"
            time.sleep(0.05)
    finally:
        backend.close()


def test_closing_the_backend_ends_every_sandbox_it_started(deno_api):
    backend = _backend(deno_api)
    before = set(deno_api.live)
    sandbox = backend.start("default", files={})
    assert sandbox.run_cell("1", timeout_s=30).outputs == [{"text/plain": "1"}]
    sandbox.close()  # disposed of on a thread, racing the backend's close
    backend.close()
    deadline = time.monotonic() + 20
    while set(deno_api.live) - before:
        assert time.monotonic() < deadline, "a sandbox outlived its backend"
        time.sleep(0.05)


def test_a_missing_token_is_a_one_line_refusal():
    with pytest.raises(BackendUnavailable, match="needs credentials: set DENO_DEPLOY_TOKEN"):
        DenoSandboxBackend(resolve_default, token=None)


def test_a_wrong_token_stops_the_server_at_start(deno_api):
    with pytest.raises(BackendUnavailable, match="refused the request: invalid API token"):
        DenoSandboxBackend(resolve_default, token="wrong", pool=WarmPool(warm=0))


def test_a_recipe_that_fails_to_build_is_refused_with_its_step_and_not_rebuilt(deno_api):
    recipe = Recipe(name="broken", apt=["libnope"])
    backend = _backend(deno_api, {"env-broken": recipe}.__getitem__)
    name = backend.artifact_name(recipe)
    try:
        with pytest.raises(SandboxError, match=r"failed to build at step 'apt' \(exit 100\)"):
            backend.start("env-broken", files={})
        creates = deno_api.console.requests.count(("POST", "/api/v2/volumes"))
        with pytest.raises(SandboxError, match="Unable to locate package libnope.*restart"):
            backend.start("env-broken", files={})
        assert deno_api.console.requests.count(("POST", "/api/v2/volumes")) == creates
        assert deno_api.console.find(deno_api.console.snapshots, name) is None
        assert deno_api.console.find(deno_api.console.volumes, f"{name}-build") is None
    finally:
        backend.close()


def test_a_recipe_with_its_own_base_image_cannot_be_baked(deno_api):
    recipe = Recipe(name="custom", base_image="rocker/r-ver:4.4")
    backend = _backend(deno_api, {"env-custom": recipe}.__getitem__)
    try:
        with pytest.raises(SandboxError, match="cannot bake base image 'rocker/r-ver:4.4'"):
            backend.start("env-custom", files={})
    finally:
        backend.close()


def test_a_sandbox_without_an_episodes_lifetime_left_takes_no_episode(deno_api):
    backend = _backend(deno_api, timeouts=Timeouts(sandbox_s=900), episode_budget_s=600)
    try:
        slot = Slot(client=None, destroy=lambda: None, meta={"born": time.monotonic()})  # type: ignore[arg-type]
        assert backend._slot_usable(slot)
        slot.meta["born"] -= 301  # 301 s old: 599 s left, less than one episode's 600
        assert not backend._slot_usable(slot)
    finally:
        backend.close()
    with pytest.raises(ValueError):
        _backend(deno_api, timeouts=Timeouts(sandbox_s=3600))  # longer than Deno lets one live


def test_a_build_running_elsewhere_is_waited_for_until_its_snapshot_exists(deno_api, tmp_path):
    recipe = Recipe(name="elsewhere", pip=["tabulate"])
    backend = _backend(deno_api, {"env-elsewhere": recipe}.__getitem__)
    name = backend.artifact_name(recipe)
    console = deno_api.console
    # another server's build: its volume exists, its snapshot does not yet
    console.volumes["vol_other"] = {"id": "vol_other", "slug": f"{name}-build", "is_bootable": True}
    lines: list[str] = []
    done = threading.Event()

    def bake() -> None:
        backend.bake(recipe, tmp_path, log=lines.append, progress=lambda f: None)
        done.set()

    baking = threading.Thread(target=bake, daemon=True)
    try:
        baking.start()
        assert not done.wait(1.0), "ready before the other server's snapshot exists"
        console.snapshots["snp_other"] = {"id": "snp_other", "slug": name, "is_bootable": True}
        assert done.wait(20), "the snapshot made elsewhere was not taken up"
        assert backend.is_built(tmp_path) and lines[-1] == f"deno: {name} is ready"
    finally:
        del console.volumes["vol_other"]
        backend.close()


def test_a_build_logs_each_step_with_its_output(deno_api, tmp_path):
    recipe = Recipe(name="logged", apt=["jq"], uv=["tabulate"])
    backend = _backend(deno_api, {"env-logged": recipe}.__getitem__)
    lines: list[str] = []
    try:
        backend.bake(recipe, tmp_path, log=lines.append, progress=lambda f: None)
    finally:
        backend.close()
    assert any(line.startswith("deno: apt: apt-get update") for line in lines), lines
    assert "fake uv pip install --system --break-system-packages tabulate" in lines
    assert deno_api.created[-1]["root"] == {"volume": f"{backend.artifact_name(recipe)}-build"}


def test_two_builds_at_once_each_log_only_their_own_steps(deno_api, tmp_path):
    recipes = {
        "env-left": Recipe(name="left", uv=["tabulate"]),
        "env-right": Recipe(name="right", uv=["toolz"]),
    }
    backend = _backend(deno_api, recipes.__getitem__)
    logs: dict[str, list[str]] = {image: [] for image in recipes}
    errors: list[BaseException] = []

    def bake(image: str) -> None:
        try:
            backend.bake(
                recipes[image], tmp_path / image, log=logs[image].append, progress=lambda f: None
            )
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=bake, args=(image,)) for image in recipes]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    finally:
        backend.close()
    assert not errors, errors
    left, right = "\n".join(logs["env-left"]), "\n".join(logs["env-right"])
    assert "pip install --system --break-system-packages tabulate" in left
    assert "pip install --system --break-system-packages toolz" in right
    assert "toolz" not in left and "tabulate" not in right


def test_a_service_that_failed_once_is_not_remembered_as_a_failed_build(deno_api, tmp_path):
    recipe = Recipe(name="transient", pip=["six"])  # a hash no other test builds
    backend = _backend(deno_api, {"env-transient": recipe}.__getitem__)
    deno_api.console.unavailable_once = "/api/v2/volumes"
    try:
        with pytest.raises(SandboxError, match="could not create build volume.*try again later"):
            backend.bake(recipe, tmp_path, log=lambda line: None, progress=lambda f: None)
        backend.bake(recipe, tmp_path, log=lambda line: None, progress=lambda f: None)
        assert backend.is_built(tmp_path)
    finally:
        deno_api.console.unavailable_once = None
        backend.close()
