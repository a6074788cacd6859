"""veRL integration: veRL's own AgentLoopWorker runs our agent loop and tools on a live server.

veRL gets its own virtual environment (``.venv/verl``, or ``$ANALYST_ENV_VERL_PYTHON``)
made by ``.ci/run``: ``verl`` without its GPU stack, the few packages its agent-loop and
tool modules import, and this package. ``verl_driver.py`` runs there: veRL's generated
trainer config pointing at the shipped YAMLs, veRL's ``RLHFDataset`` over our parquet
rows, ``AgentLoopWorker.generate_sequences`` (registry, hydra instantiation, padding,
token-level scores), with a scripted stand-in for the rollout server and a tiny local
Qwen3 tokenizer (no weights; nothing downloaded). Nothing trains: that needs a GPU.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from tcp_cuts import DroppingProxy

pytestmark = pytest.mark.live

REPO = Path(__file__).resolve().parents[2]
PYTHON = Path(os.environ.get("ANALYST_ENV_VERL_PYTHON", REPO / ".venv" / "verl" / "bin" / "python"))
DRIVER = Path(__file__).with_name("verl_driver.py")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    """A tokenizer and model config (no weights) veRL's ``HFModelConfig`` loads from disk."""
    if not PYTHON.exists():
        pytest.skip(
            f"no veRL venv at {PYTHON}: make it with .ci/run's commands (python -m venv "
            ".venv/verl; pip install torch, then verl==0.9.1 --no-deps and its imports)"
        )
    pytest.importorskip("trl", reason="the tiny tokenizer uses TRL's Qwen3 chat template")
    from analyst_env.benchmarks.tiny_tokenizer import save_tiny_qwen3

    return save_tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3"))


def start_verl(server: str, model: Path, work: Path, route: str, *loop_url: str):
    """The driver in the veRL venv; its output goes to files (a pipe would fill and block it
    while the test waits)."""
    with open(work / "stdout", "w") as out, open(work / "stderr", "w") as err:
        return subprocess.Popen(
            [str(PYTHON), str(DRIVER), server, str(model), str(work), route, *loop_url],
            stdout=out,
            stderr=err,
            cwd="/",  # not the checkout: its datasets/ package would shadow Hugging Face's
            env=dict(os.environ, HF_HUB_OFFLINE="1", RAY_DISABLE_IMPORT_WARNING="1"),
        )


def finish(proc: subprocess.Popen, work: Path) -> dict:
    proc.wait(timeout=300)
    assert proc.returncode == 0, (work / "stderr").read_text()[-4000:]
    return json.loads((work / "stdout").read_text().strip().splitlines()[-1])


def run_verl(server: str, model: Path, work: Path, route: str, *loop_url: str) -> dict:
    return finish(start_verl(server, model, work, route, *loop_url), work)


def live_sessions(server: str) -> int:
    return httpx.get(f"{server}/ready", timeout=10).json()["live_sessions"]


def test_veRLs_worker_runs_our_agent_loop_and_scores_each_trajectory_with_the_servers_reward(
    tiny_model, server, tmp_path
):
    out = run_verl(server, tiny_model, tmp_path, "agent_loop")
    assert out["agent_names"] == ["analyst_env", "analyst_env"]
    # one trajectory answered right, the other wrong: the server's 1.0 and 0.0
    assert sorted(out["rm_scores"]) == [0.0, 1.0]
    right = out["rm_scores"].index(1.0)
    first_id = out["request_ids"][0]
    assert out["env_end_reason"] == ["final_answer", "final_answer"]
    assert out["env_task_id"] == ["tiny-csv", "tiny-csv"]
    assert out["env_malformed_calls"][1 - right] == 1 and out["env_malformed_calls"][right] == 0
    # one request id per trajectory, kept over its turns (a rollout server's sticky session)
    assert len(set(out["request_ids"])) == 2 and out["request_ids"].count(first_id) == 2
    # the second turn's prompt holds the task, the tools and the server's tool result
    second_turn = out["prompts_seen"][out["request_ids"].index(first_id, 1)]
    assert "What is the total amount in sales.csv?" in second_turn
    assert '"name": "final_answer"' in second_turn  # the tool schemas the template rendered
    assert "<tool_response>" in out["whole"][right] and "7319.25" in out["whole"][right]
    assert "invalid JSON in <tool_call>" in out["whole"][1 - right]
    # only the model's tokens are trained: the tool result is in the sequence, not the mask
    assert "7319.25\n</tool_response>" not in out["responses"][right]
    assert out["responses"][right].count("<tool_call>") == 2
    # each turn is in the sequence once: the tool result is added after it, not a re-rendering
    call = '{"name": "add_and_execute_code_cell", "arguments"'
    assert out["whole"][right].count(call) == 1
    assert out["num_turns"] == [4, 4]  # prompt + assistant, tool, assistant
    assert out["bad_row_error"].startswith("ValueError: the dataset row's extra_info names no")
    assert live_sessions(server) == 0  # every episode's session was closed


def test_veRLs_tool_agent_loop_holds_one_episode_per_trajectory_through_our_tools(
    tiny_model, server, tmp_path
):
    out = run_verl(server, tiny_model, tmp_path, "tools")
    assert out["agent_names"] == ["tool_agent", "tool_agent"]
    assert "final_answer" in out["tools"] and "run_sql" in out["tools"]
    assert "rm_scores" not in out  # the reward function scores this route
    assert sorted(out["scores"]) == [0.0, 1.0]
    right = out["scores"].index(1.0)
    # the code cell ran in the episode the final answer then ended: one session each
    assert "7319.25" in out["whole"][right]
    assert out["tool_rewards"][right] == [0.0, 1.0]
    # the other trajectory listed the files and stopped without an answer: score 0, and its
    # session was closed when veRL dropped the trajectory (while the worker still ran)
    assert out["tool_rewards"][1 - right] == [0.0] and out["scores"][1 - right] == 0.0
    assert "sales.csv" in out["whole"][1 - right]
    assert out["live_sessions_after"] == 0
    assert live_sessions(server) == 0


def test_the_agent_loop_rides_out_a_dropped_connection_and_takes_several_replicas(
    tiny_model, server, tmp_path
):
    """The YAML names a dead replica and a proxy to the server; the proxy drops the
    connection while the first trajectory's cell runs: the cell ran once, the episode goes
    on to its reward on the replica it started on."""
    proxy = DroppingProxy(int(server.rsplit(":", 1)[1]))
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
    try:
        urls = f"http://127.0.0.1:{dead.getsockname()[1]},{proxy.url()}"
        proc = start_verl(server, tiny_model, tmp_path, "agent_loop_slow", urls)
        marker = tmp_path / "cell_sent"
        deadline = time.monotonic() + 240
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), "the slow cell was never sent"
        time.sleep(0.4)
        proxy.drop()
        out = finish(proc, tmp_path)
    finally:
        proxy.close()
        dead.close()
    assert sorted(out["rm_scores"]) == [0.0, 1.0]
    right = out["rm_scores"].index(1.0)
    assert out["env_resumes"][right] >= 1
    assert "<tool_response>\n1\n</tool_response>" in out["whole"][right]  # ran once
    assert out["env_end_reason"] == ["final_answer", "final_answer"]
    assert live_sessions(server) == 0
