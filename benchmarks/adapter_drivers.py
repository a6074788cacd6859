"""Play no-op episodes through one trainer adapter, the way its trainer calls it, and time them.

Run in the adapter's own interpreter (ART and HUD live in venvs of their own)::

    python -m analyst_env.benchmarks.adapter_drivers ADAPTER SERVER POLICY EPISODES CONCURRENCY

and print one JSON line: ``episodes``, ``seconds`` (the wall time of the episodes alone:
imports, tool catalogues and task lists are read before the clock starts) and ``ended``
(episodes the server ended with a reward). Every episode is a reset and one
``final_answer``, played through the adapter's own entry point (TRL's environment
factory, SkyRL's text environment, ART's rollout under ``gather_trajectory_groups``,
HUD's ``Taskset.run``), ``CONCURRENCY`` at a time; ``client`` is the typed client alone,
the rate every adapter is compared with.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ANSWER_TEXT = '<tool_call>\n{"name": "final_answer", "arguments": {"answer": "0"}}\n</tool_call>'


Played = tuple[float, int, int]
"""What a driver returns: seconds, episodes played, episodes the server ended."""


def _threaded(play: Callable[[int], bool], episodes: int, concurrency: int) -> Played:
    """Run ``play(i)`` for each episode on ``concurrency`` lanes: lane ``k`` plays episodes
    ``k``, ``k + concurrency``, ... one after another (so a lane may keep state per ``i %
    concurrency``)."""

    def lane(k: int) -> int:
        return sum(play(i) for i in range(k, episodes, concurrency))

    with ThreadPoolExecutor(concurrency) as pool:
        start = time.perf_counter()
        ended = sum(pool.map(lane, range(concurrency)))
        return time.perf_counter() - start, episodes, ended


def _rows(server: str) -> list[dict[str, Any]]:
    from analyst_env.trainers.trl import AnalystSpec

    return list(AnalystSpec(server, split="train").train_dataset)


def client(server: str, policy: str, episodes: int, concurrency: int) -> Played:
    """The typed client: reset a fresh session into a task, answer, close."""
    from analyst_env.client.analyst_client import AnalystEnv

    rows = _rows(server)

    def play(i: int) -> bool:
        with AnalystEnv(base_url=server).sync() as env:
            env.reset(seed=0, task_id=rows[i % len(rows)]["task_id"])
            return bool(env.call_tool("final_answer", answer="0").done)

    return _threaded(play, episodes, concurrency)


def trl(server: str, policy: str, episodes: int, concurrency: int) -> Played:
    """TRL: ``GRPOTrainer`` makes one environment per generation slot from
    ``AnalystSpec.environment_factory`` when it starts and resets it with each dataset row; so
    here, one environment per lane (made before the clock starts), reset and answered by its
    tool method for each episode."""
    from analyst_env.trainers.trl import AnalystSpec

    spec = AnalystSpec(server, split="train")
    rows = list(spec.train_dataset)
    lanes = [spec.environment_factory() for _ in range(concurrency)]

    def play(i: int) -> bool:
        env = lanes[i % concurrency]
        env.reset(**rows[i % len(rows)])
        env.final_answer(answer="0")
        return env.done

    try:
        return _threaded(play, episodes, concurrency)
    finally:
        for env in lanes:
            env._close()


def skyrl(server: str, policy: str, episodes: int, concurrency: int) -> Played:
    """SkyRL: ``AnalystSkyRLEnv`` built from a dataset row's extras, ``init`` then one text turn."""
    from analyst_env.trainers.skyrl import AnalystSkyRLEnv, dataset_rows

    rows = dataset_rows(server, "train")

    def play(i: int) -> bool:
        row = rows[i % len(rows)]
        env = AnalystSkyRLEnv(extras=row)
        env.init(row["prompt"])
        out = env.step(ANSWER_TEXT)
        env.close()
        return bool(out["done"])

    return _threaded(play, episodes, concurrency)


def art(server: str, policy: str, episodes: int, concurrency: int) -> Played:
    """ART: ``make_rollout``'s rollouts under ART's ``gather_trajectory_groups``, one group of
    ``CONCURRENCY`` per round, with ``art.Model`` pointed at the no-op policy."""
    import art as art_lib

    from analyst_env.trainers.art import make_rollout, scenarios

    model = art_lib.Model(
        name="noop",
        project="analyst-env-bench",
        inference_base_url=policy,
        inference_api_key="not-checked",
    )
    rollout = make_rollout(server, max_turns=2)
    chosen = scenarios(server)

    async def run() -> Played:
        start, ended = time.perf_counter(), 0
        for first in range(0, episodes, concurrency):
            batch = range(first, min(first + concurrency, episodes))
            group = art_lib.TrajectoryGroup(rollout(model, chosen[i % len(chosen)]) for i in batch)
            groups = await art_lib.gather_trajectory_groups(
                [group], pbar_desc=None, max_exceptions=0
            )
            ended += sum(1 for t in groups[0].trajectories if t.reward is not None)
        return time.perf_counter() - start, episodes, ended

    return asyncio.run(run())


def hud(server: str, policy: str, episodes: int, concurrency: int) -> Played:
    """HUD: ``Taskset.run`` with HUD's ``OpenAIChatAgent`` and ``LocalRuntime``, an
    environment per rollout, ``CONCURRENCY`` rollouts at a time."""
    from hud.agents import OpenAIChatAgent
    from hud.agents.types import OpenAIChatConfig
    from hud.eval import LocalRuntime

    from analyst_env.trainers.hud import make_environment, taskset

    agent = OpenAIChatAgent(
        OpenAIChatConfig(model="noop", base_url=policy, api_key="not-checked", max_steps=2)
    )
    tasks = taskset(server, split="train")
    slugs = list(tasks.tasks)
    group = -(-episodes // len(slugs))  # rollouts per task, enough for ``episodes`` in all
    tasks.tasks = {slug: tasks.tasks[slug] for slug in slugs[: -(-episodes // group)]}
    runtime = LocalRuntime(lambda task: make_environment(server))

    async def run() -> Played:
        start = time.perf_counter()
        job = await tasks.run(agent, runtime=runtime, group=group, max_concurrent=concurrency)
        ended = sum(1 for r in job.runs if r.reward is not None and not r.grade.is_error)
        return time.perf_counter() - start, len(job.runs), ended

    return asyncio.run(run())


class _NoopEngine:
    """vLLM's ``generate`` as OpenRLHF's executor calls it, answering every turn with the
    token ids of one ``final_answer`` call and the end-of-sequence token."""

    def __init__(self, tokenizer: Any) -> None:
        ids = tokenizer(ANSWER_TEXT, add_special_tokens=False)["input_ids"]
        self.reply = SimpleNamespace(
            token_ids=[*ids, tokenizer.eos_token_id],
            text=ANSWER_TEXT,
            finish_reason="stop",
            logprobs=None,
        )

    async def generate(self, prompt_token_ids: Any, sampling_params: Any, **_: Any) -> Any:
        return SimpleNamespace(outputs=[self.reply])


def openrlhf(server: str, policy: str, episodes: int, concurrency: int) -> Played:
    """OpenRLHF: the agent file's ``AgentExecutor`` (OpenRLHF's ``MultiTurnAgentExecutor``)
    executing each sample, ``CONCURRENCY`` at a time as its vLLM engine's event loop does,
    with the no-op policy at vLLM's interface and a small Qwen3-style tokenizer."""
    sys.path.append(os.environ["ANALYST_ENV_OPENRLHF_PATH"])  # OpenRLHF after our packages
    os.environ["ANALYST_ENV_URL"] = server
    from analyst_env.benchmarks.tiny_tokenizer import tiny_qwen3_tokenizer
    from analyst_env.trainers.openrlhf_agent import AgentExecutor, export_jsonl

    tokenizer = tiny_qwen3_tokenizer()
    engine = _NoopEngine(tokenizer)
    executor = AgentExecutor()
    with tempfile.TemporaryDirectory() as folder:
        rows = export_jsonl(server, Path(folder) / "rows.jsonl").read_text().splitlines()
    labels = [json.loads(row)["label"] for row in rows]
    params = SimpleNamespace(max_tokens=None, logprobs=None)

    async def run() -> Played:
        gate = asyncio.Semaphore(concurrency)

        async def sample(i: int) -> bool:
            async with gate:
                out = await executor.execute(
                    "", labels[i % len(labels)], params, 32768, tokenizer, engine
                )
                logs = out["extra_logs"]  # one turn: the server ended it on the answer
                return logs["turns"] == 1 and logs["tool_calls"] == 1

        start = time.perf_counter()
        ended = sum(await asyncio.gather(*(sample(i) for i in range(episodes))))
        return time.perf_counter() - start, episodes, ended

    return asyncio.run(run())


class _NoopTokenModel:
    """veRL's ``LLMServerClient.generate``: the token ids of one ``final_answer`` call."""

    def __init__(self, tokenizer: Any) -> None:
        self.ids = tokenizer.encode(ANSWER_TEXT + "<|im_end|>", add_special_tokens=False)

    async def generate(self, request_id: str, *, prompt_ids: Any, **_: Any) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        return TokenOutput(token_ids=self.ids, log_probs=[-0.1] * len(self.ids))


def verl(server: str, policy: str, episodes: int, concurrency: int) -> Played:
    """veRL: its ``AgentLoopWorker`` (built from veRL's generated trainer config and the
    agent-loop YAML this package ships) running ``generate_sequences`` on batches of
    ``CONCURRENCY`` dataset rows loaded by its ``RLHFDataset``, each trajectory our agent loop
    with the no-op policy at the token interface. The model folder (tokenizer and config)
    comes from ``ANALYST_ENV_BENCH_MODEL_DIR``."""
    from verl import DataProto
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    from analyst_env.benchmarks.verl_config import trainer_config
    from analyst_env.trainers.verl import export_parquet

    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        cfg = trainer_config(os.environ["ANALYST_ENV_BENCH_MODEL_DIR"], work, server, server)
        parquet = export_parquet(server, work / "rows.parquet", split="train")
        worker = AgentLoopWorker(cfg, llm_client=None)
        worker.llm_client = _NoopTokenModel(worker.tokenizer)
        dataset = RLHFDataset([str(parquet)], worker.tokenizer, cfg.data)
        rows = [dataset[i % len(dataset)] for i in range(episodes)]

        async def run() -> Played:
            start, ended = time.perf_counter(), 0
            for first in range(0, episodes, concurrency):
                batch = DataProto.from_single_dict(collate_fn(rows[first : first + concurrency]))
                out = await worker.generate_sequences(batch)
                ended += sum(
                    str(r) == "final_answer" for r in out.non_tensor_batch["env_end_reason"]
                )
            return time.perf_counter() - start, episodes, ended

        return asyncio.run(run())


DRIVERS = {
    "client": client,
    "trl": trl,
    "skyrl": skyrl,
    "art": art,
    "hud": hud,
    "openrlhf": openrlhf,
    "verl": verl,
}


def main(argv: list[str]) -> int:
    name, server, policy, episodes, concurrency = argv
    seconds, played, ended = DRIVERS[name](server, policy, int(episodes), int(concurrency))
    print(json.dumps({"episodes": played, "ended": ended, "seconds": seconds}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
