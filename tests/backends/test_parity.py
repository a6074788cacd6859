"""The same task gives the same observations on the local, Modal and E2B backends.

One scripted episode of a shipped ``starter`` CSV task (files, pandas, SQL,
seeded numpy, an exception, a shell command, the notebook summary and the
final answer) runs through ``AnalystEnvironment`` on each backend: the real
local fork-server backend, the Modal backend on the fake Modal SDK (the real
slot runner in a local process), and the E2B backend through the real E2B SDK
against the fake sandbox services (a real ipykernel).

Normalised before comparing, because they must differ: the episode id, and
on E2B the text of a traceback (E2B's Jupyter kernel formats and colours it,
and E2B's server joins its lines without separators; the exception name and
value are still compared). Everything else must be equal, byte for byte.
"""

from __future__ import annotations

import json
import re

import pytest

from analyst_env.datasets import load_dataset
from analyst_env.envs.remote.e2b_backend import E2BSandboxBackend
from analyst_env.envs.remote.modal_backend import ModalSandboxBackend
from analyst_env.envs.remote.runner_image import resolve_default
from analyst_env.models import CallToolAction
from analyst_env.server.environment import AnalystEnvironment
from analyst_env.server.runtime import Runtime
from analyst_env.server.settings import Settings

TASK = "starter-sales-000"
STEPS = [
    ("list_files", {}),
    (
        "add_and_execute_code_cell",
        {
            "code": (
                "import pandas as pd\ndf = "
                "pd.read_csv('sales.csv')\nprint(df.shape)\nprint(df.columns.tolist())\n"
                "round(float(df.revenue.sum()), 2)"
            )
        },
    ),
    (
        "run_sql",
        {
            "query": "SELECT region, COUNT(*) AS n, ROUND(SUM(revenue), 2) AS revenue FROM sales "
            "GROUP BY region ORDER BY region"
        },
    ),
    (
        "add_and_execute_code_cell",
        {
            "code": "import numpy as np\nprint(np.random.rand(3).round(6).tolist())\n{'rows': "
            "len(df)}"
        },
    ),
    ("add_and_execute_code_cell", {"code": "df['no_such_column']"}),
    ("execute_shell_command", {"command": "wc -l sales.csv && ls"}),
    (
        "add_and_execute_code_cell",
        {
            "code": "west = df[(df.region == 'West') & "
            "df.order_date.str.startswith('2022')]\nanswer = "
            "round(float(west.revenue.sum()), 2)\nprint(answer)"
        },
    ),
    ("get_notebook_state", {}),
]


@pytest.fixture(scope="module")
def starter():
    return load_dataset("starter")


def _settings() -> Settings:
    return Settings(cell_timeout_s=60, shell_timeout_s=30, record_trajectories=False, standbys=1)


def run_episode(runtime: Runtime) -> list[dict]:
    env = AnalystEnvironment(runtime)
    try:
        observations = [env.reset(task_id=TASK, seed=7).model_dump()]
        for tool, arguments in STEPS:
            observations.append(
                env.step(CallToolAction(tool_name=tool, arguments=arguments)).model_dump()
            )
        answer = observations[-2]["result"]["structured_content"]["stdout"].strip()
        observations.append(
            env.step(
                CallToolAction(tool_name="final_answer", arguments={"answer": answer})
            ).model_dump()
        )
        return observations
    finally:
        env.close()


def _blank_tracebacks(node):
    """Every ``traceback`` value, at any depth (cell results and the notebook's cells)."""
    if isinstance(node, dict):
        return {
            k: "<traceback>" if k == "traceback" else _blank_tracebacks(v) for k, v in node.items()
        }
    if isinstance(node, list):
        return [_blank_tracebacks(v) for v in node]
    return node


def normalise(observations: list[dict], *, vendor_traceback: bool) -> list[dict]:
    out = json.loads(json.dumps(observations, default=str))
    for obs in out:
        obs.pop("episode_id", None)
        if vendor_traceback:
            result = obs.get("result") or {}
            error = (result.get("structured_content") or {}).get("error")
            if error:
                header = f"ERROR:\n{error['name']}: {error['value']}"
                for block in result.get("content", []):
                    if header in block.get("text", ""):
                        block["text"] = block["text"][: block["text"].index(header) + len(header)]
                if isinstance(result.get("data"), str) and header in result["data"]:
                    result["data"] = result["data"][: result["data"].index(header) + len(header)]
    return [_blank_tracebacks(obs) for obs in out] if vendor_traceback else out


@pytest.fixture(scope="module")
def local_observations(starter):
    runtime = Runtime(_settings(), datasets=[starter])
    try:
        return run_episode(runtime)
    finally:
        runtime.close()


def test_local_episode_is_meaningful(local_observations):
    final = local_observations[-1]
    assert final["done"] and final["reward"] == 1.0, (
        "the scripted answer must be right on the local backend"
    )
    error_step = local_observations[5]["result"]["structured_content"]["error"]
    assert error_step["name"] == "KeyError"


def _assert_same_as_local(backend, starter, local_observations) -> None:
    """One episode on ``backend`` gives the local backend's observations (tracebacks too)."""
    runtime = Runtime(_settings(), backend=backend, datasets=[starter])
    try:
        observations = run_episode(runtime)
    finally:
        runtime.close()
    assert normalise(observations, vendor_traceback=False) == normalise(
        local_observations, vendor_traceback=False
    )


def test_modal_gives_identical_observations(local_observations, starter, modal_sdk):
    backend = ModalSandboxBackend(
        resolve_default, token_id="ak", token_secret="as", sdk=modal_sdk, warm=0
    )
    _assert_same_as_local(backend, starter, local_observations)


def test_opensandbox_gives_identical_observations(local_observations, starter, opensandbox_server):
    from analyst_env.envs.remote.opensandbox_backend import OpenSandboxBackend

    backend = OpenSandboxBackend(
        resolve_default, domain=opensandbox_server.domain, image="runner", warm=0
    )
    _assert_same_as_local(backend, starter, local_observations)


def test_e2b_gives_identical_observations(local_observations, starter, e2b_debug):
    backend = E2BSandboxBackend(resolve_default, api_key=None, template="code-interpreter-v1")
    runtime = Runtime(_settings(), backend=backend, datasets=[starter])
    try:
        observations = run_episode(runtime)
    finally:
        runtime.close()
    got = normalise(observations, vendor_traceback=True)
    want = normalise(local_observations, vendor_traceback=True)
    for step, (g, w) in enumerate(zip(got, want)):
        if g != w:
            _debug_dump(w, g)
        assert g == w, f"step {step} differs"
    assert len(got) == len(want)
    assert re.search(
        r"KeyError", observations[5]["result"]["structured_content"]["error"]["traceback"]
    )


def test_agent_sandbox_gives_identical_observations(
    local_observations, starter, agent_sandbox_cluster
):
    from analyst_env.envs.remote.agent_sandbox_backend import AgentSandboxBackend

    backend = AgentSandboxBackend(
        resolve_default, namespace=agent_sandbox_cluster.namespace, warm=0
    )
    _assert_same_as_local(backend, starter, local_observations)


def _debug_dump(a, b):
    import difflib

    print(
        "\n".join(
            difflib.unified_diff(
                json.dumps(a, indent=1).splitlines(),
                json.dumps(b, indent=1).splitlines(),
                lineterm="",
            )
        )
    )


def test_daytona_gives_identical_observations(local_observations, starter, daytona_api):
    from analyst_env.envs.remote.daytona_backend import DaytonaSandboxBackend

    backend = DaytonaSandboxBackend(
        resolve_default, api_key=daytona_api.api_key, api_url=daytona_api.api_url, warm=0
    )
    _assert_same_as_local(backend, starter, local_observations)


def test_azure_gives_identical_observations(local_observations, starter, azure_api):
    pytest.importorskip("azure.containerapps.sandbox", reason="the azure extra is not installed")
    from analyst_env.envs.remote.azure_backend import AzureSandboxBackend

    backend = AzureSandboxBackend(resolve_default, **azure_api.backend_options(), warm=0)
    runtime = Runtime(_settings(), backend=backend, datasets=[starter])
    try:
        observations = run_episode(runtime)
    finally:
        runtime.close()
    assert normalise(observations, vendor_traceback=False) == normalise(
        local_observations, vendor_traceback=False
    )


def test_runloop_gives_identical_observations(local_observations, starter, runloop_api):
    from analyst_env.envs.remote.runloop_backend import RunloopSandboxBackend

    backend = RunloopSandboxBackend(
        resolve_default, api_key=runloop_api.api_key, base_url=runloop_api.base_url, warm=0
    )
    _assert_same_as_local(backend, starter, local_observations)


def test_deno_gives_identical_observations(local_observations, starter, deno_api):
    from analyst_env.envs.remote.deno_backend import DenoSandboxBackend

    backend = DenoSandboxBackend(resolve_default, token=deno_api.token, warm=0)
    _assert_same_as_local(backend, starter, local_observations)
