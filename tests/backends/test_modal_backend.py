"""The Modal backend against the fake SDK, and the fake checked against the real SDK.

Modal has no offline mode, so the backend's only dependency on it is the
``sdk`` object it is given. ``fake_modal`` implements the calls the backend
makes; the first tests prove it is faithful to the installed ``modal`` 1.6.4
(same parameters, kinds and defaults; every recorded call binds to the real
signature), the rest run real episodes through it (the runner runs as a local
process in a fresh network namespace when root).
"""

from __future__ import annotations

import inspect
import os
import signal
import time

import pytest

from analyst_env.envs.recipes.recipe import Recipe
from analyst_env.envs.remote.artifacts import recipe_resolver
from analyst_env.envs.remote.bounded import BackendUnavailable
from analyst_env.envs.remote.modal_backend import ModalSandboxBackend, modal_image
from analyst_env.envs.remote.options import Timeouts, WarmPool
from analyst_env.envs.remote.runner_image import (
    RUNNER_REQUIREMENTS,
    RUNNER_REVISION,
    resolve_default,
)
from analyst_env.envs.sandbox import SandboxError

modal = pytest.importorskip("modal", reason="the modal extra is not installed")

# (fake attribute path, real object)
PAIRS = [
    ("Client.from_credentials", modal.Client.from_credentials),
    ("App.lookup", modal.App.lookup),
    ("Image.from_registry", modal.Image.from_registry),
    ("Image.apt_install", modal.Image.apt_install),
    ("Image.uv_pip_install", modal.Image.uv_pip_install),
    ("Image.run_commands", modal.Image.run_commands),
    ("Image.env", modal.Image.env),
    ("Image.add_local_file", modal.Image.add_local_file),
    ("Image.add_local_dir", modal.Image.add_local_dir),
    ("Image.build", modal.Image.build),
    ("Image.publish", modal.Image.publish),
    ("Image.from_name", modal.Image.from_name),
    ("Image.hydrate", modal.Image.hydrate),
    ("Sandbox.create", modal.Sandbox.create),
    ("FakeSandbox.exec", modal.Sandbox.exec),
    ("FakeSandbox.terminate", modal.Sandbox.terminate),
]


def _resolve(module, path):
    obj = module
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize("path,real", PAIRS, ids=[p for p, _ in PAIRS])
def test_fake_signatures_match_the_real_sdk(modal_sdk, path, real):
    fake = inspect.signature(_resolve(modal_sdk, path))
    real_sig = inspect.signature(real)
    real_params = real_sig.parameters
    for name, param in fake.parameters.items():
        if name in ("self", "cls"):
            continue
        assert name in real_params, f"{path}: the real SDK has no parameter {name!r}"
        assert param.kind == real_params[name].kind, (
            f"{path}: {name} is {param.kind}, real {real_params[name].kind}"
        )
        if param.default is not inspect.Parameter.empty:
            assert param.default == real_params[name].default, f"{path}: default of {name} differs"
    required = [
        n
        for n, p in real_params.items()
        if p.default is inspect.Parameter.empty
        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        and n not in ("self", "cls")
    ]
    assert set(required) <= set(fake.parameters), f"{path}: the fake lacks required {required}"


def test_stream_writer_api_matches(modal_sdk):
    from modal.io_streams import StreamWriter

    for name in ("write", "drain", "write_eof"):
        assert hasattr(StreamWriter, name) and hasattr(modal_sdk._Writer, name)
    assert list(inspect.signature(StreamWriter.write).parameters) == ["self", "data"]


@pytest.fixture
def backend(modal_sdk):
    b = ModalSandboxBackend(
        resolve_default,
        token_id="ak-test",
        token_secret="as-test",
        sdk=modal_sdk,
        pool=WarmPool(warm=1),
    )
    yield b
    b.close()


def test_episodes_run_in_sandboxes_and_every_call_binds_to_the_real_sdk(
    backend, modal_sdk, csv_file
):
    sandbox = backend.start("default", files={"sales.csv": csv_file}, seed=5, env={"K": "v"})
    result = sandbox.run_cell(
        "import os, pandas as "
        "pd\nprint(os.environ['K'])\npd.read_csv('sales.csv').groupby('region').amount.sum()",
        timeout_s=30,
    )
    assert result.stdout == "v\n" and "west    12.0" in result.outputs[0]["text/plain"]
    sandbox.close()
    real = dict(PAIRS)
    real_for = {
        "Sandbox.exec": modal.Sandbox.exec,
        "Sandbox.terminate": modal.Sandbox.terminate,
        **real,
    }
    seen = set()
    for name, args, kwargs in modal_sdk.CALLS:
        target = real_for[name]
        bound = inspect.signature(target).parameters
        bound_args = ((None,) if {"self", "cls"} & set(bound) else ()) + tuple(args)
        inspect.signature(target).bind(*bound_args, **kwargs)
        seen.add(name)
    assert {"App.lookup", "Image.publish", "Sandbox.create", "Sandbox.exec"} <= seen
    (create,) = [c for c in modal_sdk.CALLS if c[0] == "Sandbox.create"][:1]
    kwargs = create[2]
    assert kwargs["block_network"] is True
    assert kwargs["cpu"] == (0.25, 1.0) and kwargs["memory"] == (1024, 4096)


@pytest.mark.skipif(
    os.geteuid() != 0,
    reason="the fake blocks the network with a network namespace, which needs root",
)
def test_sandbox_has_no_network(backend, csv_file):
    sandbox = backend.start("default", files={})
    result = sandbox.run_cell(
        "import socket\ns = socket.socket()\ns.settimeout(2)\ns.connect(('1.1.1.1', 80))",
        timeout_s=20,
    )
    assert result.error is not None and result.error.name in ("OSError", "TimeoutError")
    sandbox.close()


def test_image_is_published_once_by_hash_and_reused(modal_sdk, csv_file):
    first = ModalSandboxBackend(
        resolve_default, token_id="a", token_secret="b", sdk=modal_sdk, pool=WarmPool(warm=0)
    )
    first.start("default", files={}).close()
    first.close()
    builds = [c for c in modal_sdk.CALLS if c[0] == "Image.build"]
    assert len(builds) == 1
    (name,) = modal_sdk.PUBLISHED
    assert (
        name == "analyst-env:" + resolve_default("default").content_hash() + f"-r{RUNNER_REVISION}"
    )
    second = ModalSandboxBackend(
        resolve_default, token_id="a", token_secret="b", sdk=modal_sdk, pool=WarmPool(warm=0)
    )
    second.start("default", files={}).close()
    second.close()
    assert len([c for c in modal_sdk.CALLS if c[0] == "Image.build"]) == 1, (
        "a published image must not be rebuilt"
    )


def test_warm_slot_makes_the_next_reset_fast(backend, csv_file):
    backend.start("default", files={}).close()
    deadline = time.monotonic() + 60
    while not backend._idle.get("default") and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(3)  # the slot's runner forks and warms its next kernel after an episode ends
    started = time.perf_counter()
    sandbox = backend.start("default", files={"sales.csv": csv_file})
    elapsed = time.perf_counter() - started
    assert sandbox.run_cell("1 + 1", timeout_s=10).outputs == [{"text/plain": "2"}]
    sandbox.close()
    assert elapsed < 3.0, (
        f"a reset on a warm slot took {elapsed:.2f} s (a new slot takes 4 s or more)"
    )


def test_image_chain_follows_the_recipe(modal_sdk):
    recipe = Recipe(
        name="etl",
        apt=["libpq5"],
        pip=["psycopg[binary]==3.2.1"],
        uv=["polars"],
        uv_index_url="https://pypi.internal/simple",
        npm=["@scope/tool@1.4.0"],
        apt_sources="deb https://mirror.internal/debian bookworm main",
    )
    steps = modal_image(modal_sdk, recipe).steps
    kinds = [s[0] for s in steps]
    assert kinds[0] == "from_registry" and steps[0][1] == ("python:3.11-slim-bookworm",)
    assert "echo 'deb https://mirror.internal/debian bookworm main'" in steps[1][1][0]
    assert steps[2] == ("apt_install", ("libpq5", "nodejs", "npm"), {})
    assert steps[3] == ("uv_pip_install", RUNNER_REQUIREMENTS, {"index_url": None})
    assert ("uv_pip_install", ("psycopg[binary]==3.2.1",), {"index_url": None}) in steps
    assert ("uv_pip_install", ("polars",), {"index_url": "https://pypi.internal/simple"}) in steps
    assert any(
        k == "run_commands" and "npm install -g @scope/tool@1.4.0" in a[0] for k, a, _ in steps
    )
    copied = [s for s in steps if s[0] in ("add_local_dir", "add_local_file")]
    assert all(s[2]["copy"] for s in copied) and len(copied) == 2


def test_missing_credentials_fail_at_once(modal_sdk):
    with pytest.raises(BackendUnavailable, match="MODAL_TOKEN_ID and MODAL_TOKEN_SECRET"):
        ModalSandboxBackend(resolve_default, token_id=None, token_secret="x", sdk=modal_sdk)


def test_unreachable_modal_fails_within_the_bound(modal_sdk):
    modal_sdk.FAULTS.hang_s = 30  # the real client retries ~58 s without network
    started = time.monotonic()
    with pytest.raises(BackendUnavailable, match="did not answer within 1 s"):
        ModalSandboxBackend(
            resolve_default,
            token_id="a",
            token_secret="b",
            sdk=modal_sdk,
            timeouts=Timeouts(connect_s=1),
        )
    assert time.monotonic() - started < 5


def test_bad_token_is_reported(modal_sdk):
    modal_sdk.FAULTS.auth_error = True
    with pytest.raises(Exception, match="Token ID is malformed"):
        ModalSandboxBackend(resolve_default, token_id="a", token_secret="b", sdk=modal_sdk)


def test_unknown_image_is_a_clear_error(backend, tmp_path):
    resolve = recipe_resolver(tmp_path, "modal")
    with pytest.raises(SandboxError, match="unknown image 'env-0123' on the modal backend"):
        resolve("env-0123")
    with pytest.raises(SandboxError, match="unknown image 'nope'"):
        backend.start("nope", files={})


def test_sandbox_killed_mid_cell_is_reported_and_the_backend_recovers(backend, modal_sdk, csv_file):
    sandbox = backend.start("default", files={"sales.csv": csv_file})
    label = sandbox.label  # "modal sandbox <object_id>"
    (victim,) = [sb for sb in modal_sdk.SANDBOXES if label.endswith(sb.object_id)]
    import threading

    def kill_runner() -> None:
        for proc in victim.processes:
            os.killpg(proc.pid, signal.SIGKILL)

    threading.Timer(1.0, kill_runner).start()
    with pytest.raises(SandboxError, match="is gone"):
        sandbox.run_cell("import time\ntime.sleep(30)", timeout_s=60)
    sandbox.close()
    fresh = backend.start("default", files={"sales.csv": csv_file})
    assert fresh.run_cell("open('sales.csv').readline()", timeout_s=20).outputs == [
        {"text/plain": "'region,amount\\n'"}
    ]
    fresh.close()


def test_bake_records_the_build_for_env_binding(backend, modal_sdk, tmp_path):
    recipe = Recipe(name="extra", preload=["json"])
    logs: list[str] = []
    out = tmp_path / recipe.content_hash()
    backend.bake(recipe, out, log=logs.append, progress=lambda f: None)
    assert backend.is_built(out) and not backend.is_built(tmp_path / "other")
    assert any("ready" in line for line in logs)
    resolved = recipe_resolver(tmp_path, "modal")("env-" + recipe.content_hash())
    assert resolved == recipe
    with pytest.raises(SandboxError):
        recipe_resolver(tmp_path, "docker")("env-" + recipe.content_hash())
