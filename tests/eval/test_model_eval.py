"""``run_eval`` with a model: the real chat client against the stand-in, the real server.

Each test plays a scripted model (see ``openai_standin.py``) through the agent
loop over the protocol and checks the rows and the report: the reward is the
server's, bad model output is answered and survived, a busy endpoint is
retried, and the model is shown exactly what the trainer adapters show.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from analyst_env.evaluation.chat_client import ChatError
from analyst_env.evaluation.engine import evaluate as evaluate_policy
from analyst_env.evaluation.run import EvalSettings, run_eval
from analyst_env.prompts import SYSTEM_PROMPT, task_prompt
from analyst_env.run_records.run_log import episode_id_for
from analyst_env.task_format import ToolCall
from analyst_env.trajectory_files import read_trajectory, trajectories_dir

pytestmark = pytest.mark.live


def evaluate(standin, env_url, tasks, tmp_path, **options):
    """Run ``run_eval`` for ``tasks`` with the stand-in model; the report."""
    settings = EvalSettings(
        dataset="tiny",
        model="standin",
        model_url=f"{standin.url}/v1",
        runs_dir=str(tmp_path / "runs"),
        retry_backoff_s=0.01,
        concurrency=3,
        **options,
    )
    report, _run_dir = asyncio.run(run_eval(settings, tasks, env_url))
    return report


def rows_of(report):
    return {r["task_id"]: r for r in report["episode_rows"]}


def test_oracle_through_native_tool_calls(standin, env_url, eval_tasks, eval_state_dir, tmp_path):
    report = evaluate(standin, env_url, eval_tasks, tmp_path)
    assert report["mean_reward"] == 1.0 and report["pass_at_k"] == {"1": 1.0}
    assert report["n"] == 3 and report["complete"] and report["errors"] == 0
    assert report["model"] == {
        "name": "standin",
        "url": f"{standin.url}/v1",
        "tool_format": "native",
    }
    assert {"dataset", "policy", "n", "mean_reward", "tasks"} <= set(report)
    for row in report["episode_rows"]:
        assert row["end_reason"] == "final_answer" and row["tools"] == {"final_answer": 1}
        assert row["prompt_tokens"] == 100 and row["completion_tokens"] == 20
    assert report["tokens"]["total"] == 3 * 120
    first = standin.requests_for(eval_tasks[0])[0]
    assert first["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert first["messages"][1]["content"].startswith(eval_tasks[0].instruction)
    assert "sales.csv" in first["messages"][1]["content"]
    names = {t["function"]["name"] for t in first["tools"]}
    assert {"final_answer", "add_and_execute_code_cell", "run_sql"} <= names
    # Every episode is in the server's trajectory store under the run's episode id.
    run_id = report["run_id"]
    for task in eval_tasks:
        episode_id = episode_id_for(run_id, task.id, 0)
        files = list(trajectories_dir(eval_state_dir).glob(f"*-{episode_id}.jsonl"))
        assert len(files) == 1, episode_id
        records = read_trajectory(files[0])
        assert records[0]["task_id"] == task.id and records[-1]["type"] == "end"
        assert records[-1]["reward"] == 1.0


def test_text_form_when_the_endpoint_refuses_tools(standin, env_url, eval_tasks, tmp_path):
    standin.use("malformed", native_tools=False)
    report = evaluate(standin, env_url, eval_tasks[:1], tmp_path)
    assert report["model"]["tool_format"] == "text"
    row = report["episode_rows"][0]
    assert row["reward"] == 1.0 and row["malformed_calls"] == 2 and row["turns"] == 3
    requests = standin.requests_for(eval_tasks[0])
    assert all("tools" not in r for r in requests)
    system = requests[0]["messages"][0]["content"]
    assert system.startswith(SYSTEM_PROMPT) and "<tools>" in system and "final_answer" in system
    answer_turn = requests[1]["messages"][-1]
    assert answer_turn["role"] == "user"
    assert answer_turn["content"].startswith("<tool_response>\nError: invalid JSON in <tool_call>")


def test_malformed_native_calls_are_answered_and_the_episode_goes_on(
    standin, env_url, eval_tasks, tmp_path
):
    standin.use("malformed")
    row = rows_of(evaluate(standin, env_url, eval_tasks[:1], tmp_path))["tiny-csv"]
    assert row["reward"] == 1.0 and row["malformed_calls"] == 2 and row["tool_calls"] == 3
    requests = standin.requests_for(eval_tasks[0])
    bad_json, no_name = requests[1]["messages"][-1], requests[2]["messages"][-1]
    assert bad_json["role"] == "tool" and bad_json["tool_call_id"] == "call_0"
    assert bad_json["content"].startswith(
        "Error: the arguments of add_and_execute_code_cell are not valid JSON"
    )
    assert no_name["content"] == "Error: a tool call must name a function"


def test_unknown_tools_get_the_servers_error(standin, env_url, eval_tasks, tmp_path):
    standin.use("unknown-tool")
    row = rows_of(evaluate(standin, env_url, eval_tasks[:1], tmp_path))["tiny-csv"]
    assert row["reward"] == 1.0 and row["unknown_tool_calls"] == 1 and row["tool_errors"] == 1
    assert row["tools"] == {"drop_database": 1, "final_answer": 1}
    told = standin.requests_for(eval_tasks[0])[1]["messages"][-1]["content"]
    assert "Unknown tool: 'drop_database'" in told


def test_text_only_replies_end_the_episode_unrewarded(standin, env_url, eval_tasks, tmp_path):
    standin.use("chatty")
    report = evaluate(standin, env_url, eval_tasks, tmp_path)
    assert report["mean_reward"] == 0.0 and report["failures"] == {"no_tool_call": 3}
    row = rows_of(report)["tiny-csv"]
    assert row["turns"] == 1 and row["tool_calls"] == 0
    assert "7319.25" in row["last_reply"]  # the answer in prose is not an answer


def test_over_long_replies_and_the_token_budget(standin, env_url, eval_tasks, tmp_path):
    standin.use("rambler")
    row = rows_of(evaluate(standin, env_url, eval_tasks[:1], tmp_path))["tiny-csv"]
    assert row["end_reason"] == "truncated_reply" and row["completion_tokens"] == 4096
    assert len(row["last_reply"]) <= 400
    standin.use("lister")
    row = rows_of(evaluate(standin, env_url, eval_tasks[:1], tmp_path, token_budget=2500))[
        "tiny-csv"
    ]
    assert row["end_reason"] == "token_budget" and row["turns"] == 3
    assert row["tools"] == {"list_files": 3}


def test_turn_limit_and_the_servers_step_limit(standin, env_url, eval_tasks, tmp_path):
    standin.use("lister")
    row = rows_of(evaluate(standin, env_url, eval_tasks[:1], tmp_path, max_turns=2))["tiny-csv"]
    assert row["end_reason"] == "max_turns" and row["turns"] == 2
    row = rows_of(evaluate(standin, env_url, eval_tasks[:1], tmp_path))["tiny-csv"]
    assert row["end_reason"] == "step_limit" and row["turns"] == eval_tasks[0].max_steps


def test_500_429_and_slow_replies_are_retried(standin, env_url, eval_tasks, tmp_path):
    standin.use("oracle", fail_first=[500, 429])
    report = evaluate(standin, env_url, eval_tasks, tmp_path)
    assert report["mean_reward"] == 1.0
    assert [r["retries"] for r in report["episode_rows"]] == [2, 2, 2]
    standin.use("oracle", delay_s=3.0)
    report = evaluate(standin, env_url, eval_tasks[:1], tmp_path, request_timeout_s=0.5)
    assert report["mean_reward"] == 1.0 and report["episode_rows"][0]["retries"] == 1


def test_a_down_endpoint_fails_transiently_and_the_run_resumes(
    standin, env_url, eval_tasks, tmp_path
):
    standin.use("oracle", fail_first=[503] * 10)
    report = evaluate(standin, env_url, eval_tasks, tmp_path, retries=2)
    assert report["mean_reward"] == 0.0 and report["errors"] == 3
    row = report["episode_rows"][0]
    assert row["end_reason"] == "model_error" and row["transient"] is True
    assert "HTTP 503" in row["error"] and "after 3 attempts" in row["error"]
    standin.use("oracle")
    again = evaluate(standin, env_url, eval_tasks, tmp_path, retries=2)
    assert again["run_id"] == report["run_id"]
    assert again["mean_reward"] == 1.0 and again["errors"] == 0 and again["episodes"] == 3
    log = (tmp_path / "runs" / report["run_id"] / "log.jsonl").read_text().splitlines()
    assert len(log) == 1 + 3 + 3  # the header, the failed episodes, their re-runs


def test_an_endpoint_that_refuses_the_model_stops_the_run(standin, env_url, eval_tasks, tmp_path):
    standin.use("no-such-model")
    with pytest.raises(ChatError, match="HTTP 404.*does not exist"):
        evaluate(standin, env_url, eval_tasks, tmp_path)
    assert not (tmp_path / "runs").exists()


def test_samples_give_unbiased_pass_at_k(standin, env_url, eval_tasks, tmp_path):
    standin.use("alternate")
    report = evaluate(standin, env_url, eval_tasks, tmp_path, samples=4)
    assert report["episodes"] == 12 and report["n"] == 3
    assert report["mean_reward"] == 0.5
    assert report["pass_at_k"] == pytest.approx({"1": 0.5, "2": 5 / 6, "4": 1.0})
    for task in report["tasks"]:
        assert (
            task["samples"] == 4
            and task["solved"] == 2
            and sorted(task["rewards"]) == [0.0, 0.0, 1.0, 1.0]
        )
    assert report["summary"]["kind"]["csv"]["accuracy"] == 0.5
    assert set(report["summary"]["kind"]) == {"csv", "sqlite", "excel"}
    json.dumps(report)  # the report is plain JSON


def test_the_prompt_is_the_trainers_prompt(standin, env_url, eval_tasks, tmp_path):
    evaluate(standin, env_url, eval_tasks[:1], tmp_path)
    user = standin.requests_for(eval_tasks[0])[0]["messages"][1]["content"]
    from analyst_env.client import AnalystEnv

    with AnalystEnv(base_url=env_url).sync() as env:
        obs = env.reset(task_id="tiny-csv").observation
    assert user == task_prompt(obs.instruction, obs.files)


def test_oracle_and_null_are_policies_of_the_same_loop(env_url, eval_tasks):
    oracle = asyncio.run(evaluate_policy(env_url, eval_tasks, "oracle", samples=2))
    null = asyncio.run(evaluate_policy(env_url, eval_tasks, "null"))
    assert [r["reward"] for r in oracle] == [1.0] * 6 and {r["sample"] for r in oracle} == {0, 1}
    assert [r["reward"] for r in null] == [0.0] * 3
    assert all(r["end_reason"] == "final_answer" and "error" not in r for r in oracle + null)
    broken = eval_tasks[0].model_copy(update={"oracle_steps": [ToolCall(tool="no_such_tool")]})
    (row,) = asyncio.run(evaluate_policy(env_url, [broken], "oracle"))
    assert row["end_reason"] == "policy_error" and row["reward"] == 0.0
    assert row["error"].startswith("step no_such_tool failed: Error: Unknown tool")
