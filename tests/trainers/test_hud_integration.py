"""HUD integration: HUD's tasksets, runtime and agent play our environment against a live server.

hud 0.6.21 pins fastmcp==3.4.10, so it gets its own virtual environment
(``.venv/hud``, or ``$ANALYST_ENV_HUD_PYTHON``) with this package's client side,
made by ``.ci/run``. The test runs HUD's ``Taskset.run`` with its
``LocalRuntime`` and its ``OpenAIChatAgent`` (which opens our MCP capability
and offers the tools to the model) there, on :func:`make_environment`, against
a server and a stand-in OpenAI-compatible model (``tests/eval/openai_standin.py``)
started here. No HUD account or API key is involved: without one HUD registers
no job on its platform.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from support import curriculum_server

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "eval"))
from openai_standin import _answer, _call  # noqa: E402
from tcp_cuts import DroppingProxy, later  # noqa: E402

pytestmark = pytest.mark.live
ANSWER = "7319.25"  # tiny-csv's answer
SLOW_CELL = "runs = globals().get('runs', 0) + 1\nimport time\ntime.sleep(1.5)\nprint(runs)"

REPO = Path(__file__).resolve().parents[2]
PYTHON = Path(os.environ.get("ANALYST_ENV_HUD_PYTHON", REPO / ".venv" / "hud" / "bin" / "python"))

SCRIPT = r"""
import asyncio, json, sys
from hud.agents import OpenAIChatAgent
from hud.agents.types import OpenAIChatConfig
from hud.eval import LocalRuntime
from analyst_env.trainers.hud import make_environment, taskset

server, model_url, task_id, group, shared, play_on = sys.argv[1:7]

async def main():
    agent = OpenAIChatAgent(OpenAIChatConfig(
        model="standin", base_url=model_url, api_key="not-checked", max_steps=6))
    if task_id.startswith("curriculum:"):  # two rows the server picks tasks for
        tasks = taskset(server, client_id=task_id.split(":", 1)[1], num_tasks=2)
    else:
        tasks = taskset(server, split="train", seed=4)
        tasks.tasks = {slug: t for slug, t in tasks.tasks.items() if t.args["task_id"] == task_id}
    if shared == "shared":
        runtime = LocalRuntime(make_environment(play_on))
    else:
        runtime = LocalRuntime(lambda task: make_environment(play_on))
    job = await tasks.run(agent, runtime=runtime, group=int(group), max_concurrent=int(group))
    print(json.dumps({
        "job_reward": job.reward,
        "runs": [{
            "reward": run.reward, "info": run.grade.info, "error": run.grade.is_error,
            "content": run.trace.content, "status": run.trace.status,
            "stop": run.trace.stop_reason,
        } for run in job.runs],
    }))

asyncio.run(main())
"""


def run_job(server, standin, script, task_id, *, group=1, shared=False, replicas=None) -> dict:
    """HUD's ``Taskset.run`` over ``group`` rollouts of ``task_id``, in the HUD venv.

    ``replicas`` is the URL the environment plays on (the server's own by default); the
    taskset is always read from the server.
    """
    if not PYTHON.exists():
        pytest.skip(
            f"no HUD venv at {PYTHON}: make it with .ci/run's commands (python -m venv "
            ".venv/hud; pip install 'hud==0.6.21' 'openenv>=0.10,<0.11', then this package)"
        )
    standin.use(script)
    env = dict(os.environ, HUD_TELEMETRY_ENABLED="false", HUD_API_KEY="")
    args = [server, standin.url + "/v1", task_id, str(group), "shared" if shared else "own"]
    args.append(replicas or server)
    proc = subprocess.run(
        [str(PYTHON), "-c", SCRIPT, *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd="/",
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # our MCP server comes and goes with each rollout without its access log or a traceback of
    # its cancelled lifespan (HUD's own relay may still log its cancelled splice)
    quiet = "starlette/routing.py" not in proc.stderr and '"POST /mcp' not in proc.stderr
    assert quiet, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def live_sessions(server: str) -> int:
    return httpx.get(f"{server}/ready", timeout=10).json()["live_sessions"]


def sessions_close(server: str) -> bool:
    deadline = time.monotonic() + 30
    while live_sessions(server) and time.monotonic() < deadline:
        time.sleep(0.2)
    return live_sessions(server) == 0


def test_the_agent_plays_the_tools_over_mcp_and_the_run_carries_the_servers_reward(server, standin):
    out = run_job(server, standin, "oracle-then-stop", "tiny-csv", group=2)
    assert [r["reward"] for r in out["runs"]] == [1.0, 1.0] and out["job_reward"] == 1.0
    first, second = out["runs"]
    assert first["info"]["task_id"] == "tiny-csv" and first["info"]["end_reason"] == "final_answer"
    assert first["info"]["tool_calls"] == 1 and first["content"] == "Done."
    assert first["info"]["episode_id"] != second["info"]["episode_id"]
    asked = standin.requests[0]
    tools = {t["function"]["name"] for t in asked["tools"]}
    assert {"final_answer", "run_sql", "add_and_execute_code_cell"} <= tools
    assert asked["messages"][0]["content"][0]["text"].startswith("What is the total amount")
    assert sessions_close(server)


def test_a_tool_call_runs_in_the_episode_and_its_result_reaches_the_model(server, standin):
    out = run_job(server, standin, "look-then-answer", "tiny-csv")
    (run,) = out["runs"]
    assert run["reward"] == 1.0 and run["info"]["tool_calls"] == 2
    (listing,) = [m["content"] for m in standin.requests[1]["messages"] if m["role"] == "tool"]
    assert "sales.csv" in listing  # the server's answer, from the episode's sandbox


def test_an_answer_given_as_the_last_message_is_submitted_and_graded(server, standin):
    out = run_job(server, standin, "answer-in-text", "tiny-csv")
    (run,) = out["runs"]
    assert run["reward"] == 1.0 and run["content"] == "7319.25"
    assert run["info"]["tool_calls"] == 0  # the template submitted the answer
    assert run["info"]["end_reason"] == "final_answer"


def test_a_wrong_answer_scores_0(server, standin):
    out = run_job(server, standin, "wrong", "tiny-sqlite")
    (run,) = out["runs"]
    assert run["reward"] == 0.0 and run["error"] is False
    assert sessions_close(server)


def test_a_shared_environment_object_plays_its_rollouts_one_after_another(server, standin):
    out = run_job(server, standin, "oracle-then-stop", "tiny-csv", group=2, shared=True)
    assert [r["reward"] for r in out["runs"]] == [1.0, 1.0]
    assert sessions_close(server)


def test_curriculum_rows_give_each_group_of_runs_one_task_the_server_picked(tmp_path, standin):
    with curriculum_server(tmp_path, sessions=8) as url:
        job = run_job(url, standin, "wrong", "curriculum:hud-run-1", group=2)
        clients = httpx.get(url + "/web/curriculum").json()["clients"]
    assert [run["error"] for run in job["runs"]] == [False] * 4, job
    played = sorted(run["info"]["task_id"] for run in job["runs"])
    assert len(set(played)) == 2 and played[0] == played[1] and played[2] == played[3], played
    assert all(t.startswith("procedural-") for t in played)
    (mine,) = [c for c in clients if c["client"] == "hud-run-1"]
    assert mine["episodes"] == 4


def test_a_row_without_a_task_or_a_second_episode_on_one_object_is_refused(server):
    if not PYTHON.exists():
        pytest.skip(f"no HUD venv at {PYTHON}")
    probe = f"""
import asyncio
from analyst_env.trainers.hud import make_environment, TEMPLATE

async def main():
    env = make_environment({server!r})
    start = env.templates[TEMPLATE].func
    try:
        await start(seed=1).__anext__()
    except ValueError as exc:
        print("no task:", exc)
    first = start(task_id="tiny-csv")
    await first.__anext__()
    try:
        await start(task_id="tiny-csv").__anext__()
    except RuntimeError as exc:
        print("second:", exc)
    print("first:", (await first.asend("7319.25"))["score"])
    await first.aclose()

asyncio.run(main())
"""
    out = subprocess.run([str(PYTHON), "-c", probe], capture_output=True, text=True, cwd="/")
    assert "no task: a scenario needs a task_id" in out.stdout, out.stderr[-2000:]
    assert "second: this environment object is already playing an episode" in out.stdout
    assert "first: 1.0" in out.stdout  # the refusal left the first episode alone
    assert sessions_close(server)


def test_a_dropped_connection_resumes_the_episode_and_a_dead_replica_is_skipped(server, standin):
    proxy = DroppingProxy(int(server.rsplit(":", 1)[1]))
    cuts = [proxy.drop, proxy.partition]

    def slow_cells(task, messages, turn, text):
        """Two slow cells, each cut while it runs, then the answer."""
        if turn < 2:
            later(0.4, cuts[turn])
            return _call("add_and_execute_code_cell", {"code": SLOW_CELL}, text=text)
        if turn == 2:
            return _call("final_answer", {"answer": ANSWER}, text=text)
        return _answer("Done.")

    standin._script_slow_cells = slow_cells
    try:
        out = run_job(
            server, standin, "slow-cells", "tiny-csv", replicas=f"http://127.0.0.1:9,{proxy.url()}"
        )
    finally:
        proxy.close()
    (run,) = out["runs"]
    assert run["reward"] == 1.0 and run["info"]["tool_calls"] == 3
    assert proxy.connections >= 3  # the first, and at least one more after each cut
    printed = [m["content"].strip() for m in standin.requests[2]["messages"] if m["role"] == "tool"]
    assert printed == ["1", "2"]  # each cell ran once, its output came back over the new link
    assert sessions_close(server)
