"""Live: the TRL, SkyRL and Gymnasium adapters ride out a dropped connection (issue 14, item 4).

Each adapter plays an episode through a local TCP proxy that drops the connection
while a cell runs, and once more as a half-open link (the client's side cut, the
server's side left open: the resume takes the episode over from the connection the
server still holds); the tool call returns that cell's output, the cell ran once,
and the episode goes on to its reward.
"""

from __future__ import annotations

import json

import pytest
from tcp_cuts import DroppingProxy, later

from analyst_env.server.app import build_app
from analyst_env.server.local_server import BackgroundServer

pytestmark = pytest.mark.live
SLOW_CELL = "runs = globals().get('runs', 0) + 1\nimport time\ntime.sleep(1.5)\nprint(runs)"
ANSWER = "7319.25"  # tiny-csv's answer (the tiny dataset's sales total)


@pytest.fixture(scope="module")
def server(settings, runtime):
    app = build_app(settings.model_copy(update={"resume_grace_s": 10.0}), runtime=runtime)
    with BackgroundServer(app) as url:
        yield url


@pytest.fixture
def proxy(server):
    proxy = DroppingProxy(int(server.rsplit(":", 1)[1]))
    yield proxy
    proxy.close()


def test_trl_tool_env(proxy):
    from analyst_env.trainers.trl import AnalystToolEnv

    env = AnalystToolEnv(base_url=proxy.url())
    env.reset(task_id="tiny-csv")
    later(0.4, proxy.drop)
    assert env.add_and_execute_code_cell(code=SLOW_CELL).strip() == "1"
    later(0.4, proxy.partition)
    assert env.add_and_execute_code_cell(code=SLOW_CELL).strip() == "2"
    assert env._client.async_client.resumes == 2
    env.final_answer(answer=ANSWER)
    assert env.done and env.get_reward() == 1.0
    env._close()


def test_skyrl_env(proxy):
    from analyst_env.trainers.skyrl import AnalystSkyRLEnv

    env = AnalystSkyRLEnv({}, {"task_id": "tiny-csv", "base_url": proxy.url()})
    env.init([{"role": "user", "content": ""}])

    def call(name: str, **arguments) -> str:
        return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"

    later(0.4, proxy.drop)
    out = env.step(call("add_and_execute_code_cell", code=SLOW_CELL))
    assert "<tool_response>\n1\n</tool_response>" in out["observations"][0]["content"]
    later(0.4, proxy.partition)
    out = env.step(call("add_and_execute_code_cell", code=SLOW_CELL))
    assert "<tool_response>\n2\n</tool_response>" in out["observations"][0]["content"]
    out = env.step(call("final_answer", answer=ANSWER))
    assert out["done"] and out["reward"] == 1.0
    env.close()


def test_gymnasium_env(proxy):
    from analyst_env.client.gym_env import AnalystGymEnv

    env = AnalystGymEnv(base_url=proxy.url())
    env.reset(options={"task_id": "tiny-csv"})

    def call(name: str, **arguments) -> tuple:
        return env.step(json.dumps({"tool": name, "arguments": arguments}))

    later(0.4, proxy.drop)
    assert call("add_and_execute_code_cell", code=SLOW_CELL)[0].strip() == "1"
    later(0.4, proxy.partition)
    text, _, _, _, info = call("add_and_execute_code_cell", code=SLOW_CELL)
    assert text.strip() == "2" and info["step_count"] == 2
    _, reward, terminated, _, _ = call("final_answer", answer=ANSWER)
    assert terminated and reward == 1.0
    env.close()
