"""The E2B backend through the real ``e2b-code-interpreter`` SDK, against local fakes.

``E2B_DEBUG=true`` makes the unmodified SDK skip E2B's control plane and talk
to the sandbox's services on localhost; ``fake_e2b`` serves them with a real
ipykernel per code context and E2B's own generated Connect process service.
"""

from __future__ import annotations

import json
import time

import pytest

from analyst_env.envs.recipes.recipe import Recipe
from analyst_env.envs.remote.bounded import BackendUnavailable
from analyst_env.envs.remote.e2b_backend import E2BSandboxBackend
from analyst_env.envs.remote.e2b_sandbox import cell_result, strip_ansi
from analyst_env.envs.remote.e2b_template import template_builder
from analyst_env.envs.remote.options import Sizing
from analyst_env.envs.remote.runner_image import RUNNER_REVISION, resolve_default
from analyst_env.envs.sandbox import SandboxClosedError, SandboxError

e2b = pytest.importorskip("e2b", reason="the e2b extra is not installed")


@pytest.fixture
def backend(e2b_debug):
    b = E2BSandboxBackend(resolve_default, api_key=None, template="code-interpreter-v1")
    yield b
    b.close()


def test_cells_shell_and_files_through_the_real_sdk(backend, e2b_debug, csv_file):
    sandbox = backend.start("default", files={"data/sales.csv": csv_file}, seed=3, env={"K": "v"})
    assert sandbox.workdir == "/home/user/work"
    assert open(e2b_debug.path("/home/user/work/data/sales.csv")).read().startswith("region,amount")
    result = sandbox.run_cell(
        "import os, pandas as "
        "pd\nprint(os.environ['K'])\nfloat(pd.read_csv('data/sales.csv').amount.sum())",
        timeout_s=30,
    )
    assert (result.stdout, result.outputs, result.execution_count) == (
        "v\n",
        [{"text/plain": "16.0"}],
        1,
    )
    error = sandbox.run_cell("{}['missing']", timeout_s=30)
    assert (error.error.name, error.error.value) == ("KeyError", "'missing'")
    assert "\x1b[" not in error.error.traceback and "KeyError" in error.error.traceback
    assert error.execution_count == 2
    silent = sandbox.run_cell("print('quiet'); 5", timeout_s=30, silent=True)
    assert (silent.stdout, silent.outputs, silent.execution_count) == ("quiet\n", [], None)
    assert sandbox.run_cell("6", timeout_s=30).execution_count == 3, "silent cells do not count"
    shell = sandbox.run_shell("ls data; echo err >&2; exit 4", timeout_s=20)
    assert (shell.stdout, shell.stderr, shell.exit_code, shell.timed_out) == (
        "sales.csv\n",
        "err\n",
        4,
        False,
    )
    assert sandbox.run_shell("echo $K", timeout_s=20).stdout == "v\n"
    sandbox.put_file("out/r.json", b'{"a": 1}')
    assert json.loads(sandbox.get_file("out/r.json")) == {"a": 1}
    with pytest.raises(FileNotFoundError):
        sandbox.get_file("nope.txt")
    with pytest.raises(ValueError, match="outside the working directory"):
        sandbox.put_file("../../etc/x", b"")
    sandbox.close()
    with pytest.raises(SandboxClosedError):
        sandbox.run_cell("1", timeout_s=5)


def test_seed_matches_numpy_global_rng(backend, csv_file):
    import numpy as np

    sandbox = backend.start("default", files={}, seed=42)
    result = sandbox.run_cell("import numpy as np\nprint(repr(np.random.rand()))", timeout_s=30)
    np.random.seed(42)
    assert result.stdout == repr(np.random.rand()) + "\n"
    sandbox.close()


def test_timeout_restarts_the_kernel_and_keeps_files(backend, csv_file):
    sandbox = backend.start("default", files={"sales.csv": csv_file})
    sandbox.run_cell("x = 1", timeout_s=30)
    started = time.monotonic()
    result = sandbox.run_cell("import time\nwhile True: time.sleep(0.05)", timeout_s=2)
    assert result.timed_out and result.kernel_restarted and result.error.name == "TimeoutError"
    assert time.monotonic() - started < 30
    after = sandbox.run_cell("'x' in dir(), open('sales.csv').readline()", timeout_s=30)
    assert after.outputs == [{"text/plain": "(False, 'region,amount\\n')"}]
    assert after.execution_count == 1, "a fresh kernel counts from 1, as on the local backend"
    timed = sandbox.run_shell("sleep 20", timeout_s=1)
    assert timed.timed_out and timed.exit_code is None
    sandbox.close()


def test_vendor_quirks_are_mapped_faithfully():
    """E2B strips one pair of quotes from a text/plain result; the mapping keeps what arrives."""
    from e2b_code_interpreter.models import Execution, ExecutionError, Logs, Result

    execution = Execution(
        results=[
            Result(
                text="abc",
                html="<b>abc</b>",
                png="iVBOR",
                is_main_result=True,
                extra={"application/x": 1},
            )
        ],
        logs=Logs(stdout=["a\n", "b\n"], stderr=["w\n"]),
        error=ExecutionError("ValueError", "bad", "\x1b[0;31mValueError\x1b[0m: bad\n"),
    )
    result = cell_result(execution, 4)
    assert result.stdout == "a\nb\n" and result.stderr == "w\n"
    assert result.outputs == [
        {"text/plain": "abc", "text/html": "<b>abc</b>", "image/png": "iVBOR", "application/x": 1}
    ]
    assert result.error.traceback == "ValueError: bad" and result.execution_count == 4
    assert strip_ansi("\x1b[1;32mok\x1b[0m") == "ok"


def test_output_is_capped_like_the_local_kernel():
    from e2b_code_interpreter.models import Execution, Logs

    execution = Execution(logs=Logs(stdout=["x" * 100, "y" * 100]))
    result = cell_result(execution, 1, limit=150)
    assert (
        result.stdout.startswith("x" * 100 + "y" * 50)
        and "50 more bytes were dropped" in result.stdout
    )


def test_template_per_recipe_and_sizing():
    recipe = Recipe(
        name="docs",
        apt=["poppler-utils"],
        pip=["pypdf==4.2.0"],
        npm=["@scope/tool@1.4.0"],
        pip_index_url="https://pypi.internal/simple",
    )
    template = template_builder(e2b, recipe)
    steps = e2b.Template.to_json(template)
    assert "code-interpreter-v1" in steps and "poppler-utils" in steps
    assert "pip install --index-url https://pypi.internal/simple pypdf==4.2.0" in steps
    assert "@scope/tool@1.4.0" in steps
    small = E2BSandboxBackend.__new__(E2BSandboxBackend)
    small.sizing = Sizing(cpus=1.0, memory_mb=2048)
    big = E2BSandboxBackend.__new__(E2BSandboxBackend)
    big.sizing = Sizing(cpus=2.0, memory_mb=2048)
    assert small.template_name(recipe) != big.template_name(recipe), (
        "sizing is part of an E2B template"
    )
    assert small.template_name(recipe).startswith("analyst-env-") and small.template_name(
        recipe
    ).endswith(f"-r{RUNNER_REVISION}")
    assert small._memory(Recipe(name="odd", memory_mb=1025)) == 1026


def test_missing_api_key_is_a_clear_startup_error(monkeypatch):
    monkeypatch.delenv("E2B_DEBUG", raising=False)
    monkeypatch.delenv("E2B_API_KEY", raising=False)
    with pytest.raises(BackendUnavailable, match="set E2B_API_KEY"):
        E2BSandboxBackend(resolve_default, api_key=None)


def test_unreachable_service_fails_fast_with_the_reason(monkeypatch, csv_file):
    monkeypatch.delenv("E2B_DEBUG", raising=False)
    backend = E2BSandboxBackend(
        resolve_default,
        api_key="e2b_" + "0" * 40,
        domain="e2b.invalid",
        template="code-interpreter-v1",
    )
    started = time.monotonic()
    with pytest.raises(SandboxError, match="E2B could not create a sandbox"):
        backend.start("default", files={"sales.csv": csv_file})
    assert time.monotonic() - started < 30
    backend.close()


def test_bad_task_files_are_refused_before_any_sandbox(backend, tmp_path):
    with pytest.raises(SandboxError, match="must be a relative path"):
        backend.start("default", files={"../x.csv": str(tmp_path / "x")})
    with pytest.raises(SandboxError, match="could not open task file"):
        backend.start("default", files={"x.csv": str(tmp_path / "missing.csv")})
