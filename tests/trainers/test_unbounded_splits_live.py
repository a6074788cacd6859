"""Trainer rows over a split made on demand (``serve --dataset procedural:SEED``).

Listing such a split would make every task, so the TRL spec and the SkyRL rows name
tasks by place (split and index, from ``start``) and need ``num_tasks``; a reset by
place then plays the task the server makes for that index.
"""

from __future__ import annotations

import pickle

import pytest
from support import procedural_server

from analyst_env.trainers.skyrl import dataset_rows
from analyst_env.trainers.trl import AnalystSpec

pytestmark = pytest.mark.live

SEED = 31337


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with procedural_server(tmp_path_factory.mktemp("procedural-cache"), SEED, 8) as live:
        yield live


def _made(runtime, split: str, index: int):
    return runtime.select(task_id=None, split=split, index=index, seed=None)


def test_a_split_made_on_demand_needs_a_range(served):
    url, _ = served
    with pytest.raises(ValueError, match="num_tasks"):
        AnalystSpec(url, split="train").tasks()
    with pytest.raises(ValueError, match="filtered by dataset"):
        AnalystSpec(url, dataset="procedural", split="train", num_tasks=2).tasks()
    with pytest.raises(ValueError, match="num_tasks >= 1"):
        AnalystSpec(url, split="train", num_tasks=0)


def test_trl_rows_are_places_and_a_reset_plays_the_task_of_that_place(served):
    url, runtime = served
    spec = AnalystSpec(url, split="test", num_tasks=3, start=10, seed=2)
    rows = spec.train_dataset
    assert rows["index"] == [10, 11, 12] and set(rows["split"]) == {"test"}
    assert "task_id" not in rows.column_names and rows[0]["seed"] == 2
    env = pickle.loads(pickle.dumps(spec.environment_factory))()
    try:
        prompt = env.reset(**rows[1])
        made = _made(runtime, "test", 11)
        assert env.task_id == made.id
        assert made.instruction.split("\n")[0] in prompt
    finally:
        env._close()


def test_skyrl_rows_reset_by_place(served):
    skyrl_gym = pytest.importorskip("skyrl_gym", reason="SkyRL rows need the 'skyrl' extra")
    from analyst_env.trainers.skyrl import ENV_CLASS, register

    url, runtime = served
    rows = dataset_rows(url, "train", num_tasks=2, start=5)
    assert [r["extra_info"] for r in rows] == [
        {"split": "train", "index": 5},
        {"split": "train", "index": 6},
    ]
    assert all(r["task_id"] is None for r in rows)
    register()
    row = rows[0]
    extras = {k: v for k, v in row.items() if k not in ("prompt", "env_class")}
    env = skyrl_gym.make(ENV_CLASS, env_config={}, extras=extras)
    try:
        messages, info = env.init(row["prompt"])
        made = _made(runtime, "train", 5)
        assert info["task_id"] == made.id
        assert made.instruction.split("\n")[0] in messages[-1]["content"]
    finally:
        env.close()
