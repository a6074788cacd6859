"""TRL integration: a real ``GRPOTrainer`` step against a live server, through TRL's own code.

The model is a tiny random Qwen3 and the tokenizer is trained here on local text,
with TRL's shipped Qwen3 chat template, so nothing is downloaded. The first
completion of the step is replaced by a scripted ``final_answer`` tool call (TRL's
private ``_generate_single_turn`` is wrapped; trl is pinned exactly for this), so
the tool path runs deterministically: TRL parses the call, calls the bound
method, which plays it on the live server, and ``get_reward`` feeds the verdict
back into the advantage.
"""

from __future__ import annotations

import inspect
import os
import pickle

import pytest

pytest.importorskip(
    "trl", reason="TRL integration needs the 'trl' extra (torch==2.13.0 first, then trl)"
)
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from analyst_env.benchmarks.tiny_tokenizer import tiny_qwen3_tokenizer  # noqa: E402
from analyst_env.server.app import build_app  # noqa: E402
from analyst_env.server.local_server import BackgroundServer  # noqa: E402
from analyst_env.server.runtime import Runtime  # noqa: E402
from analyst_env.server.tools import TOOLS  # noqa: E402
from analyst_env.trainers.trl import AnalystSpec, AnalystToolEnv  # noqa: E402
from analyst_env.trajectory_files import read_trajectory, trajectories_dir  # noqa: E402

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def server(settings, tiny_dataset, tmp_path_factory):
    state = tmp_path_factory.mktemp("trl-state")
    cfg = settings.model_copy(update={"state_dir": str(state), "record_trajectories": True})
    runtime = Runtime(cfg, datasets=[tiny_dataset])
    try:
        with BackgroundServer(build_app(cfg, runtime=runtime)) as url:
            yield url, state
    finally:
        runtime.close()


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_qwen3_tokenizer()


def test_tool_methods_are_bound_on_the_class_from_the_catalog_with_schemas_trl_accepts(server):
    from transformers.utils import get_json_schema

    url, _ = server
    env = AnalystToolEnv(base_url=url)
    methods = {
        name: getattr(env, name)
        for name, _ in inspect.getmembers(AnalystToolEnv, inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    }
    assert set(methods) == set(TOOLS)
    schema = get_json_schema(methods["add_and_execute_code_cell"])["function"]
    assert schema["parameters"]["required"] == ["code"]
    assert schema["parameters"]["properties"]["code"]["type"] == "string"
    images = get_json_schema(methods["get_notebook_state"])["function"]["parameters"]
    assert images["properties"]["include_images"]["type"] == "boolean" and "required" not in images
    for method in methods.values():
        get_json_schema(method)  # raises on a missing or malformed docstring


def test_episode_prompt_tools_reward_and_tools_raise_after_the_end(server):
    url, _ = server
    env = AnalystToolEnv(base_url=url)
    prompt = env.reset(task_id="tiny-csv", seed=0, prompt=[{"role": "user", "content": ""}])
    assert (
        "total amount in sales.csv" in prompt and "sales.csv (csv" in prompt and "amount" in prompt
    )
    assert "7319.25" in env.run_sql(query="SELECT SUM(amount) FROM sales")
    assert "Error" in env.run_sql(query="SELEC nonsense")  # a failing call is text for the model
    assert env.get_reward() == 0.0
    env.final_answer(answer="7319.25")
    assert env.done and env.get_reward() == 1.0
    with pytest.raises(RuntimeError, match="episode is over"):
        env.list_files()
    assert "sales.csv" not in env.reset(task_id="tiny-sqlite")  # a new episode, a fresh session
    assert env.get_reward() == 0.0 and not env.done
    env._close()


def test_a_row_that_names_no_task_is_refused_before_a_session_opens(server):
    """A row with only a prompt (and a seed) would give each rollout of a group whatever task
    the server draws; it is refused, as every other adapter refuses it."""
    url, _ = server
    env = AnalystToolEnv(base_url=url)
    with pytest.raises(ValueError, match="a row needs a task_id"):
        env.reset(seed=3, prompt=[{"role": "user", "content": ""}])
    assert env._client is None  # no session was opened for it
    assert "total amount" in env.reset(task_id="tiny-csv", seed=3)  # the env still works
    env._close()


def test_spec_rows_come_from_the_task_api_and_the_factory_pickles(server):
    url, _ = server
    spec = AnalystSpec(url, split="train", seed=3)
    rows = spec.train_dataset
    assert sorted(rows["task_id"]) == ["tiny-csv", "tiny-sqlite"]
    assert set(rows.column_names) == {"prompt", "task_id", "seed"} and rows[0]["seed"] == 3
    assert "answer" not in rows.column_names
    factory = pickle.loads(pickle.dumps(spec.environment_factory))
    assert isinstance(factory(), AnalystToolEnv)
    with pytest.raises(ValueError, match="no split 'nope'"):
        AnalystSpec(url, split="nope").tasks()
    with pytest.raises(ValueError, match="no tasks"):
        AnalystSpec(url, dataset="not-served", split="train").tasks()


def test_a_real_grpo_step_plays_a_scripted_tool_call_on_the_live_server(
    server, tokenizer, tmp_path
):
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    url, state = server
    spec = AnalystSpec(url, split="train", num_tasks=1)  # tiny-csv only
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(
        Qwen3Config(
            vocab_size=len(tokenizer),
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            max_position_embeddings=16384,
            tie_word_embeddings=True,
            bos_token_id=None,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
    )
    args = GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=1,
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=96,
        use_cpu=True,
        report_to="none",
        logging_steps=1,
        save_strategy="no",
        bf16=False,
        gradient_checkpointing=False,
    )
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=args,
        train_dataset=spec.train_dataset,
        environment_factory=spec.environment_factory,
        reward_funcs=spec.reward_funcs,
    )
    call = (
        '<tool_call>\n{"name": "final_answer", "arguments": {"answer": '
        '"7319.25"}}\n</tool_call><|im_end|>'
    )
    real, calls = trainer._generate_single_turn, {"n": 0}

    def scripted(prompt_ids, *a, **kw):
        ids, logprobs = real(prompt_ids, *a, **kw)
        calls["n"] += 1
        if calls["n"] == 1:
            ids = [tokenizer(call, add_special_tokens=False)["input_ids"]] + list(ids[1:])
        return ids, logprobs

    trainer._generate_single_turn = scripted
    trainer.train()

    assert trainer.state.global_step == 1
    log = trainer.state.log_history[0]
    assert log["tools/call_frequency"] == 0.5 and log["tools/failure_frequency"] == 0.0
    assert (
        log["rewards/AnalystToolEnv/mean"] == 0.5
    )  # the scripted rollout solved it, the random one did not
    assert log["grad_norm"] > 0
    # The call reached the server as parsed: its recorded trajectory ends with the answer and reward
    # 1.
    ends = [
        r
        for f in trajectories_dir(state).glob("*.jsonl")
        for r in read_trajectory(f)
        if r["type"] == "end"
    ]
    assert any(e["submitted_answer"] == "7319.25" and e["reward"] == 1.0 for e in ends)
