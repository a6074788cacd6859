"""SkyRL integration: ``skyrl_gym.make`` builds our env from a parquet row and plays a live
episode."""

from __future__ import annotations

import pytest
from support import curriculum_server

skyrl_gym = pytest.importorskip("skyrl_gym", reason="SkyRL integration needs the 'skyrl' extra")

from analyst_env.server.local_server import BackgroundServer  # noqa: E402
from analyst_env.trainers.skyrl import (  # noqa: E402
    ENV_CLASS,
    dataset_rows,
    export_parquet,
    parse_tool_calls,
    register,
)

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def url(app):
    with BackgroundServer(app) as base_url:
        yield base_url


def rows_of(url, tmp_path):
    import pyarrow.parquet as pq

    return pq.read_table(export_parquet(url, tmp_path / "train.parquet", split="train")).to_pylist()


def test_parquet_rows_have_skyrls_columns_and_list_the_tools(url, tmp_path):
    rows = rows_of(url, tmp_path)
    assert sorted(r["task_id"] for r in rows) == ["tiny-csv", "tiny-sqlite"]
    row = rows[0]
    assert row["env_class"] == ENV_CLASS and row["reward_spec"]["method"] == "rule"
    system = row["prompt"][0]["content"]
    assert "<tools>" in system and '"final_answer"' in system and "<tool_call>" in system


def test_a_multi_turn_episode_through_skyrl_gym_make(url, tmp_path):
    register()
    row = next(r for r in rows_of(url, tmp_path) if r["task_id"] == "tiny-csv")
    extras = {k: v for k, v in row.items() if k not in ("prompt", "env_class")} | {"max_turns": 5}
    env = skyrl_gym.make(row["env_class"], env_config={}, extras=extras)
    messages, info = env.init(row["prompt"])
    assert info["task_id"] == "tiny-csv" and "sales.csv" in messages[-1]["content"]
    out = env.step(
        'Let me look.\n<tool_call>\n{"name": "run_sql", "arguments": {"query": "SELECT '
        'SUM(amount) AS s FROM sales"}}\n</tool_call>'
    )
    assert not out["done"] and out["reward"] == 0.0
    assert (
        "<tool_response>" in out["observations"][0]["content"]
        and "7319.25" in out["observations"][0]["content"]
    )
    bad = env.step("<tool_call>{not json}</tool_call>")
    assert not bad["done"] and "invalid JSON" in bad["observations"][0]["content"]
    # An argument called `name` (a model's slip) is the tool's error, not a crash of the step.
    named = env.step('<tool_call>{"name": "list_files", "arguments": {"name": "x"}}</tool_call>')
    assert not named["done"] and "name" in named["observations"][0]["content"]
    final = env.step(
        '<tool_call>{"name": "final_answer", "arguments": {"answer": "7319.25"}}</tool_call>'
    )
    assert final["done"] and final["reward"] == 1.0 and final["observations"] == []
    assert env.get_metrics()["solved"] == 1.0
    env.close()
    env.close()


def test_a_turn_without_a_tool_call_ends_with_reward_0(url, tmp_path):
    register()
    row = next(r for r in rows_of(url, tmp_path) if r["task_id"] == "tiny-sqlite")
    env = skyrl_gym.make(
        ENV_CLASS, env_config={}, extras={"task_id": "tiny-sqlite", "base_url": url}
    )
    env.init(row["prompt"])
    out = env.step("The answer is 9.")
    assert out["done"] and out["reward"] == 0.0
    env.close()


def test_curriculum_rows_let_the_server_pick_each_task_for_the_client(tmp_path):
    """Rows with a ``client_id`` and no task, against ``--curriculum``: every episode's task is
    the server's pick, counted for that client (``/web/curriculum``); the samples of one row
    (its ``curriculum_group``) get one task."""
    import httpx

    register()
    with curriculum_server(tmp_path, sessions=4) as url:
        rows = dataset_rows(url, num_tasks=3, client_id="skyrl-run-1")
        assert [r["task_id"] for r in rows] == [None] * 3
        played = []
        for row in rows:
            extras = {k: v for k, v in row.items() if k not in ("prompt", "env_class")}
            env = skyrl_gym.make(row["env_class"], env_config={}, extras=extras)
            _, info = env.init(row["prompt"])
            played.append(info["task_id"])
            out = env.step(
                '<tool_call>{"name": "final_answer", "arguments": {"answer": "x"}}</tool_call>'
            )
            assert out["done"] and out["metadata"]["task_id"] == info["task_id"]
            env.close()
        assert all(t.startswith("procedural-") for t in played), played
        assert len(set(played)) == 3  # one task a row
        clients = httpx.get(url + "/web/curriculum").json()["clients"]
        (mine,) = [c for c in clients if c["client"] == "skyrl-run-1"]
        assert mine["episodes"] == 3, clients
        # a second sample of the first row: its group's task
        extras = {k: v for k, v in rows[0].items() if k not in ("prompt", "env_class")}
        env = skyrl_gym.make(rows[0]["env_class"], env_config={}, extras=extras)
        assert env.init(rows[0]["prompt"])[1]["task_id"] == played[0]
        env.close()
    with pytest.raises(ValueError, match="num_tasks"):
        dataset_rows("http://127.0.0.1:1", client_id="x")


def test_parse_tool_calls_and_missing_configuration():
    assert parse_tool_calls('<tool_call>{"name": "list_files"}</tool_call>') == [
        {"name": "list_files", "arguments": {}}
    ]
    assert parse_tool_calls(
        '<tool_call>{"name": "run_sql", "arguments": "{\\"query\\": \\"x\\"}"}</tool_call>'
    )[0]["arguments"] == {"query": "x"}
    assert "must be" in parse_tool_calls("<tool_call>[1]</tool_call>")[0]
    from analyst_env.trainers.skyrl import AnalystSkyRLEnv

    with pytest.raises(ValueError, match="server URL"):
        AnalystSkyRLEnv({}, {"task_id": "x"})
    with pytest.raises(ValueError, match="task_id"):
        AnalystSkyRLEnv({}, {"base_url": "http://127.0.0.1:1"})
