"""ART integration: ART's own groups and gather drive our rollout against a live server.

openpipe-art gets its own virtual environment (``.venv/art``, or
``$ANALYST_ENV_ART_PYTHON``) with this package installed beside it, made by
``.ci/run``: its litellm pin and weave/polars stack stay out of the main venv.
The test runs ART's ``Model``, ``TrajectoryGroup`` and
``gather_trajectory_groups`` there, on our ``make_rollout``, against a server
and a stand-in OpenAI-compatible model (``tests/eval/openai_standin.py``,
asked for logprobs as a trainer's vLLM is) started here. Nothing trains: that
needs ART's GPU backend.
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
from openai_standin import StandIn  # noqa: E402

pytestmark = pytest.mark.live

REPO = Path(__file__).resolve().parents[2]
PYTHON = Path(os.environ.get("ANALYST_ENV_ART_PYTHON", REPO / ".venv" / "art" / "bin" / "python"))

SCRIPT = r"""
import asyncio, json, sys
import art
from openai.types.chat.chat_completion import Choice
from analyst_env.trainers.art import curriculum_scenarios, make_rollout, scenarios

server, model_url, task_id, per_group = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

async def main():
    model = art.Model(name="standin", project="analyst-env-test",
                      inference_base_url=model_url, inference_api_key="not-checked")
    rollout = make_rollout(server, max_turns=4)
    if task_id.startswith("curriculum:"):  # two scenarios the server picks tasks for
        chosen = curriculum_scenarios(task_id.split(":", 1)[1], 2, seed=3)
    else:
        chosen = [s for s in scenarios(server, seed=3) if s.task_id == task_id]
    groups = await art.gather_trajectory_groups(
        [art.TrajectoryGroup(rollout(model, s) for _ in range(per_group)) for s in chosen],
        pbar_desc="test", max_exceptions=per_group * len(chosen),
    )
    out = []
    for group in groups:
        trajectories = []
        for t in group.trajectories:
            turns = t.messages_and_choices
            trajectories.append({
                "reward": t.reward, "metrics": t.metrics, "metadata": t.metadata,
                "kinds": ["Choice" if isinstance(m, Choice) else m["role"] for m in turns],
                "logprobs": [len(m.logprobs.content) if m.logprobs else 0
                             for m in turns if isinstance(m, Choice)],
                "call_ids": [c.id for m in turns if isinstance(m, Choice)
                             for c in m.message.tool_calls or []],
                "tool_message_ids": [m["tool_call_id"] for m in turns
                                     if not isinstance(m, Choice) and m["role"] == "tool"],
                "tools": [tool["function"]["name"] for tool in t.tools or []],
                "dump": t.model_dump(mode="json"),
            })
        out.append({
            "trajectories": trajectories,
            "exceptions": [e.type.split("'")[1] for e in group.exceptions],
            "errors": [e.message for e in group.exceptions],
        })
    print(json.dumps(out))

asyncio.run(main())
"""


def gather(server: str, standin: StandIn, script: str, task_id: str, per_group: int) -> list:
    """Run ART's gather over ``per_group`` rollouts of ``task_id`` in the ART venv
    (``curriculum:CLIENT``: two groups of curriculum scenarios for that client)."""
    if not PYTHON.exists():
        pytest.skip(
            f"no ART venv at {PYTHON}: make it with .ci/run's commands (python -m venv "
            ".venv/art; pip install 'openpipe-art==0.5.18' 'openai==2.54.0', then this package)"
        )
    standin.use(script)
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", WANDB_MODE="disabled")
    proc = subprocess.run(
        [str(PYTHON), "-c", SCRIPT, server, standin.url + "/v1", task_id, str(per_group)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd="/",
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


TOKENIZE = r"""
import json, sys
sys.path.append(sys.argv[1])  # ART's packages after ours: this venv's torch and transformers
import art
from art.preprocessing.tokenize import tokenize_trajectory_groups
from openai.types.chat.chat_completion import Choice
from analyst_env.benchmarks.tiny_tokenizer import tiny_qwen3_tokenizer

def rebuild(dump):
    turns = dump["messages_and_choices"]
    dump["messages_and_choices"] = [Choice.model_validate(m) if "finish_reason" in m else m
                                    for m in turns]
    return art.Trajectory.model_validate(dump)

group = art.TrajectoryGroup([rebuild(d) for d in json.loads(sys.stdin.read())])
results = tokenize_trajectory_groups(
    tiny_qwen3_tokenizer(), [group], allow_training_without_logprobs=False,
    scale_rewards=True, shuffle_group_trajectories=False,
)
print(json.dumps([{
    "reward": r.trajectory.reward, "advantage": r.advantage, "trained": sum(r.assistant_mask),
    "with_logprobs": sum(1 for lp in r.logprobs if lp == lp),
    "tool_responses": r.chat.count("<tool_response>"),
} for r in results]))
"""


def tokenize_with_art(dumps: list[dict]) -> list[dict]:
    """ART's own GRPO tokenization of one group of trajectories, with a tiny local tokenizer.

    It needs torch and transformers, which ART's base install lacks and the trl extra
    brings: ART's pure-Python package from its venv runs on this venv's torch.
    """
    pytest.importorskip("trl", reason="ART's tokenization needs transformers (the 'trl' extra)")
    purelib = subprocess.run(
        [str(PYTHON), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    proc = subprocess.run(
        [sys.executable, "-c", TOKENIZE, purelib],
        input=json.dumps(dumps),
        capture_output=True,
        text=True,
        timeout=300,
        cwd="/",
        env=dict(
            os.environ,
            LITELLM_LOCAL_MODEL_COST_MAP="True",
            HF_HUB_OFFLINE="1",
            PYTHONPATH=str(REPO / "tests"),
        ),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def live_sessions(server: str) -> int:
    return httpx.get(f"{server}/ready", timeout=10).json()["live_sessions"]


def test_a_correct_script_earns_the_servers_reward_1_with_choices_and_tool_messages(
    server, standin, tiny_dataset
):
    task = next(t for t in tiny_dataset.tasks if t.id == "tiny-csv")
    (group,) = gather(server, standin, "oracle", "tiny-csv", per_group=2)
    assert group["exceptions"] == [], group["errors"]
    first, second = group["trajectories"]
    assert [t["reward"] for t in (first, second)] == [1.0, 1.0]
    turns = len(task.oracle_steps) + 1  # the oracle's tool steps, then final_answer
    assert first["kinds"] == ["system", "user"] + ["Choice", "tool"] * turns
    assert all(n > 0 for n in first["logprobs"]) and len(first["logprobs"]) == turns
    assert first["tool_message_ids"] == first["call_ids"]  # each result answers its call
    assert "final_answer" in first["tools"] and "run_sql" in first["tools"]
    assert first["metrics"]["turns"] == turns and first["metrics"]["solved"] is True
    assert first["metadata"]["task_id"] == "tiny-csv" and first["metadata"]["seed"] == 3
    assert first["metadata"]["end_reason"] == "final_answer"
    assert first["metadata"]["episode_id"] != second["metadata"]["episode_id"]
    asked = standin.requests[0]
    assert asked["logprobs"] is True and asked["model"] == "standin"
    assert {t["function"]["name"] for t in asked["tools"]} == set(first["tools"])


def test_a_wrong_answer_scores_0_from_the_server(server, standin):
    (group,) = gather(server, standin, "wrong", "tiny-sqlite", per_group=1)
    (trajectory,) = group["trajectories"]
    assert trajectory["reward"] == 0.0 and trajectory["metrics"]["solved"] is False
    assert trajectory["kinds"] == ["system", "user", "Choice", "tool"]
    assert trajectory["metadata"]["end_reason"] == "final_answer"


@pytest.mark.parametrize("script", ["malformed", "unknown_tool", "name_argument"])
def test_broken_or_hostile_calls_are_answered_and_the_episode_goes_on(server, standin, script):
    (group,) = gather(server, standin, script, "tiny-csv", per_group=1)
    assert group["exceptions"] == [], group["errors"]
    (trajectory,) = group["trajectories"]
    assert trajectory["reward"] == 1.0  # the script's last call is the right answer
    turns = trajectory["metrics"]["turns"]
    assert trajectory["kinds"] == ["system", "user"] + ["Choice", "tool"] * turns
    malformed = 2 if script == "malformed" else 0  # bad JSON, no function name: not sent
    assert trajectory["metrics"]["malformed_calls"] == malformed


def test_a_failing_model_endpoint_is_a_group_exception_and_the_episodes_close(server, standin):
    (group,) = gather(server, standin, "no-such-model", "tiny-csv", per_group=2)
    assert group["trajectories"] == [] and group["exceptions"] == ["openai.NotFoundError"] * 2
    deadline = time.monotonic() + 30
    while live_sessions(server) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert live_sessions(server) == 0


def test_arts_tokenization_trains_on_every_assistant_token_of_a_mixed_group(server, standin):
    (right,) = gather(server, standin, "oracle", "tiny-csv", per_group=1)[0]["trajectories"]
    (wrong,) = gather(server, standin, "wrong", "tiny-sqlite", per_group=1)[0]["trajectories"]
    solved, failed = tokenize_with_art([right["dump"], wrong["dump"]])
    assert (solved["reward"], failed["reward"]) == (1.0, 0.0)
    assert solved["advantage"] > 0.9 and failed["advantage"] < -0.9  # GRPO: (r - mean) / std
    # every token the endpoint gave a logprob for is trained, and nothing else
    assert solved["trained"] == solved["with_logprobs"] == sum(right["logprobs"]) > 0
    assert failed["trained"] == failed["with_logprobs"] == sum(wrong["logprobs"])
    # the tool results are in the prompt ART trains on, up to the last assistant turn
    assert solved["tool_responses"] == len(right["tool_message_ids"]) - 1


def test_curriculum_scenarios_give_each_group_one_task_the_server_picked(tmp_path, standin):
    """Against ``--curriculum``: ART's groups of ``curriculum_scenarios`` each play the one
    task the server picked for the group, another for the other group, all counted for the
    client."""
    with curriculum_server(tmp_path, sessions=8) as url:
        groups = gather(url, standin, "wrong", "curriculum:art-run-1", per_group=3)
        clients = httpx.get(url + "/web/curriculum").json()["clients"]
    picked = []
    for group in groups:
        assert group["exceptions"] == [], group["errors"]
        tasks = {t["metadata"]["task_id"] for t in group["trajectories"]}
        assert len(group["trajectories"]) == 3 and len(tasks) == 1, tasks
        assert [t["reward"] for t in group["trajectories"]] == [0.0] * 3
        picked += tasks
    assert len(set(picked)) == 2 and all(t.startswith("procedural-") for t in picked)
    (mine,) = [c for c in clients if c["client"] == "art-run-1"]
    assert mine["episodes"] == 6


def test_the_adapter_imports_without_art_and_a_scenario_must_name_its_task():
    probe = "import sys, analyst_env.trainers.art; print('art' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    from analyst_env.trainers.art import AnalystScenario

    assert AnalystScenario(split="train", index=2).reset_options() == {"split": "train", "index": 2}
    with pytest.raises(ValueError, match="task_id"):
        AnalystScenario(seed=1).reset_options()
