"""verifiers 0.4: its built-in ``OpenEnvTaskset`` plays our live server with no code of ours.

verifiers 0.4 pins ``mcp==2`` while openenv 0.10 needs fastmcp 3 (``mcp<2``), so
verifiers lives in its own virtual environment (``.venv/verifiers``, or
``$ANALYST_ENV_VERIFIERS_PYTHON``); the test runs verifiers' taskset and its
``OpenEnvEnv.run`` there against a server started here. The model is a scripted
player that answers with the JSON actions ``OpenEnvEnv`` parses (we cannot
reach a model service); everything else is verifiers' and openenv's own code.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from analyst_env.server.local_server import BackgroundServer

pytestmark = pytest.mark.live

REPO = Path(__file__).resolve().parents[2]
PYTHON = Path(
    os.environ.get("ANALYST_ENV_VERIFIERS_PYTHON", REPO / ".venv" / "verifiers" / "bin" / "python")
)

SCRIPT = r"""
import asyncio, contextlib, json, sys
from verifiers.v1.tasksets.openenv import OpenEnvConfig, OpenEnvEnv, OpenEnvTaskset

url, replies = sys.argv[1], json.loads(sys.argv[2])
taskset = OpenEnvTaskset(OpenEnvConfig(base_url=url, resets=[{"task_id": "tiny-csv"}]))
(task,) = list(taskset.load())

class Trace:
    def __init__(self): self.rewards, self.stopped = {}, None
    def stop(self, why): self.stopped = why
    def record_reward(self, name, value): self.rewards[name] = value

class Segment:
    def __init__(self, reply): self.last_reply, self.terminated = reply, False

class Interaction:
    def __init__(self): self.trace, self.seen = Trace(), []
    async def turn(self, payload):
        self.seen.append(json.loads(payload))
        return Segment(replies[len(self.seen) - 1])

class Player:
    def __init__(self): self.last = None
    @contextlib.asynccontextmanager
    async def interaction(self, task):
        self.last = Interaction()
        yield self.last

class Agents:
    player = Player()

env = OpenEnvEnv.__new__(OpenEnvEnv)
asyncio.run(OpenEnvEnv.run(env, task, Agents()))
inter = Agents.player.last
first = inter.seen[0]
print(json.dumps({
    "rewards": inter.trace.rewards,
    "turns": len(inter.seen),
    "tools": [t["name"] for t in first["action_schema"].get("available_tools", [])],
    "instruction": first["observation"].get("instruction"),
}))
"""


@pytest.fixture(scope="module")
def url(app):
    with BackgroundServer(app) as base_url:
        yield base_url


def play(url: str, replies: list[str]) -> dict:
    if not PYTHON.exists():
        pytest.skip(
            f"no verifiers venv at {PYTHON}: python -m venv .venv/verifiers && "
            ".venv/verifiers/bin/pip install 'verifiers[openenv]==0.4.0'"
        )
    proc = subprocess.run(
        [str(PYTHON), "-c", SCRIPT, url, json.dumps(replies)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd="/",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def action(tool: str, **arguments) -> str:
    return json.dumps({"type": "call_tool", "tool_name": tool, "arguments": arguments})


def test_openenv_taskset_solves_a_task_and_sums_the_reward(url):
    out = play(
        url,
        [
            action("run_sql", query="SELECT SUM(amount) FROM sales"),
            action("final_answer", answer="7319.25"),
        ],
    )
    assert out["rewards"] == {"openenv_reward": 1.0}
    assert (
        out["turns"] == 2
    )  # the second observation carried the SQL result; the answer ended the episode
    assert "final_answer" in out["tools"] and "total amount" in out["instruction"]


def test_openenv_taskset_wrong_answer_scores_0(url):
    out = play(url, ["```json\n" + action("final_answer", answer="1") + "\n```"])
    assert out["rewards"] == {"openenv_reward": 0.0}
