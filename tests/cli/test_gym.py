"""The Gymnasium adapter, in-process and against a live server."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import analyst_env  # noqa: F401  (registers the id)
from analyst_env.client.gym_env import AnalystGymEnv, UnicodeText
from analyst_env.server.local_server import BackgroundServer


def act(tool: str, **arguments) -> str:
    return json.dumps({"tool": tool, "arguments": arguments})


def play(env) -> None:
    text, info = env.reset(seed=0, options={"task_id": "tiny-csv"})
    assert "total amount" in text and "sales.csv" in text and info["task_id"] == "tiny-csv"
    assert env.observation_space.contains(text), (
        "real text (spaces, punctuation, newlines) is in the space"
    )
    text, reward, terminated, truncated, info = env.step(
        act("run_sql", query="SELECT SUM(amount) FROM sales")
    )
    assert "7319.25" in text and reward == 0.0 and not terminated and not truncated
    text, reward, terminated, truncated, info = env.step("not json")
    assert text.startswith("Error:") and info["error"] == "invalid_action"
    text, reward, terminated, truncated, info = env.step(act("final_answer", answer="7319.25"))
    assert reward == 1.0 and terminated and not truncated


def test_text_space_accepts_real_text():
    space = UnicodeText(max_length=50)
    assert space.contains('{"tool": "run_sql", "arguments": {"query": "SELECT 1;"}}'[:50])
    assert not space.contains("x" * 51) and not space.contains(5)
    assert not gym.spaces.Text(max_length=50).contains("a b"), "the default charset rejects spaces"


def test_registered_id_makes_an_in_process_env(tiny_dataset, monkeypatch, tmp_path):
    env = gym.make("analyst_env/DataAnalyst-v0", dataset="starter")
    try:
        text, info = env.reset(seed=3)
        assert info["task_id"].startswith("starter-") and text
        text, *_ = env.step(act("list_files"))
        assert "bytes" in text
    finally:
        env.close()


@pytest.mark.live
def test_an_env_needs_a_server_or_a_link():
    with pytest.raises(ValueError, match="gymnasium.make"):
        AnalystGymEnv()


@pytest.mark.live
def test_registered_id_with_base_url_plays_against_a_live_server(app):
    with BackgroundServer(app) as url:
        env = gym.make("analyst_env/DataAnalyst-v0", base_url=url)
        try:
            play(env)
        finally:
            env.close()


@pytest.mark.live
def test_gym_env_against_a_live_server(app):
    with BackgroundServer(app) as url:
        env = AnalystGymEnv(base_url=url)
        try:
            play(env)
        finally:
            env.close()


@pytest.mark.parametrize(
    "statements",
    [
        ["import analyst_env", "assert 'gymnasium' not in sys.modules", "import gymnasium"],
        ["import gymnasium", "import analyst_env"],
        ["import analyst_env.client", "import gymnasium.envs.registration", "import gymnasium"],
    ],
    ids=["analyst_env-first", "gymnasium-first", "submodule-first"],
)
def test_id_is_registered_whatever_the_import_order(statements):
    """Importing analyst_env does not import gymnasium, yet the id is there once gymnasium is."""
    import subprocess
    import sys

    code = "; ".join(
        [
            "import sys",
            *statements,
            "print(gymnasium.spec('analyst_env/DataAnalyst-v0').entry_point)",
        ]
    )
    done = subprocess.run(
        [sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "analyst_env.gymnasium_entry:make_gym_env"
