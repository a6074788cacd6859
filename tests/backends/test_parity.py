"""The same task gives the same observations on every backend as on the local one.

One scripted episode of a shipped ``starter`` CSV task (files, pandas, SQL,
seeded numpy, an exception, a shell command, the notebook summary and the
final answer) runs through ``AnalystEnvironment`` on the real local fork-server
backend, then on each backend of ``backend_cases.CASES`` (the table the contract
uses): the vendors' real SDKs against their fakes, e.g. the Modal backend on the
fake Modal SDK (the real slot runner in a local process) and the E2B backend
against the fake sandbox services (a real ipykernel).

Normalised before comparing, because they must differ: the episode id, and
on E2B the text of a traceback (E2B's Jupyter kernel formats and colours it,
and E2B's server joins its lines without separators; the exception name and
value are still compared). Everything else must be equal, byte for byte.
"""

from __future__ import annotations

import json

import pytest
from backend_cases import CASES

from analyst_env.datasets import load_dataset
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


@pytest.mark.parametrize("name", sorted(set(CASES) - {"local"}))
def test_gives_identical_observations(name, local_observations, starter, request):
    case = CASES[name](request)
    runtime = Runtime(_settings(), backend=case.backend, datasets=[starter])
    try:
        observations = run_episode(runtime)
    finally:
        runtime.close()
    got = normalise(observations, vendor_traceback=case.vendor_kernel)
    want = normalise(local_observations, vendor_traceback=case.vendor_kernel)
    for step, (g, w) in enumerate(zip(got, want)):
        if g != w:
            _debug_dump(w, g)
        assert g == w, f"step {step} differs on {name}"
    assert len(got) == len(want)
    assert "KeyError" in observations[5]["result"]["structured_content"]["error"]["traceback"]


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
