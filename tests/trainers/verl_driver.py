"""Runs veRL's own rollout code on our agent loop and tools (executed in the veRL venv).

``python verl_driver.py SERVER MODEL_DIR WORK_DIR ROUTE [LOOP_URL]``: builds veRL's trainer config
from its generated defaults, loads the rows with veRL's ``RLHFDataset`` and
``collate_fn``, makes an ``AgentLoopWorker`` (which reads the shipped YAML configs with
the live server's URL put in) and awaits its ``generate_sequences``. The model is a
scripted stand-in for veRL's ``LLMServerClient``: per trajectory it answers with token
ids of a tool call, then of a final answer (right for the first trajectory it sees,
wrong for the second). Prints one JSON line of what came out.

ROUTE ``agent_loop`` or ``tools``; ``agent_loop_slow`` is ``agent_loop`` whose code cell
takes 1.5 s and counts its runs, and which writes ``WORK_DIR/cell_sent`` as it hands that
call out (so the test can cut the connection while the cell runs). LOOP_URL is what the
agent-loop YAML names (default SERVER; e.g. several replicas).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import httpx
from verl import DataProto
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
from verl.trainer.ppo.reward import get_custom_reward_fn
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn
from verl.workers.rollout.replica import TokenOutput

from analyst_env.benchmarks.verl_config import trainer_config

CODE = "import pandas as pd\nprint(pd.read_csv('sales.csv').amount.sum())"
SLOW_CODE = "runs = globals().get('runs', 0) + 1\nimport time\ntime.sleep(1.5)\nprint(runs)"
TURNS = {
    "right": [
        {"name": "add_and_execute_code_cell", "arguments": {"code": CODE}},
        {"name": "final_answer", "arguments": {"answer": "7319.25"}},
    ],
    "wrong": [
        '{"name": ',  # malformed: the loop answers it with an error and goes on
        {"name": "final_answer", "arguments": {"answer": "12"}},
    ],
    "unfinished": [{"name": "list_files", "arguments": {}}],  # then stops: no final answer
}


class ScriptedModel:
    """Stands in for ``LLMServerClient.generate``: token ids of the next scripted turn."""

    def __init__(self, tokenizer, second: str = "wrong", marker: Path | None = None) -> None:
        self.tokenizer = tokenizer
        self.second = second
        self.marker = marker
        self.scripts: dict[str, list] = {}
        self.prompts: list[str] = []
        self.request_ids: list[str] = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_) -> TokenOutput:
        if request_id not in self.scripts:
            kind = "right" if not self.scripts else self.second
            self.scripts[request_id] = [dict(t) if isinstance(t, dict) else t for t in TURNS[kind]]
            if self.marker is not None and kind == "right":
                self.scripts[request_id][0] = {
                    "name": "add_and_execute_code_cell",
                    "arguments": {"code": SLOW_CODE},
                }
        self.request_ids.append(request_id)
        self.prompts.append(self.tokenizer.decode(prompt_ids))
        turn = self.scripts[request_id].pop(0) if self.scripts[request_id] else None
        if turn is None:
            text = "Done.<|im_end|>"
        else:
            body = turn if isinstance(turn, str) else json.dumps(turn)
            text = f"<tool_call>\n{body}\n</tool_call><|im_end|>"
            if self.marker is not None and isinstance(turn, dict):
                if turn["arguments"].get("code") == SLOW_CODE:
                    self.marker.write_text("sent")
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids))


async def main(server: str, model_dir: str, work: Path, route: str, loop_url: str) -> dict:
    cfg = trainer_config(model_dir, work, server, loop_url)
    if route.startswith("agent_loop"):
        from analyst_env.trainers.verl import export_parquet

        parquet = export_parquet(server, work / "rows.parquet", split="train")
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        from analyst_env.trainers.verl_tools import tool_dataset_rows

        parquet = work / "tool_rows.parquet"
        pq.write_table(pa.Table.from_pylist(tool_dataset_rows(server, "train", seed=3)), parquet)
    worker = AgentLoopWorker(cfg, llm_client=None)
    model = ScriptedModel(
        worker.tokenizer,
        "unfinished" if route == "tools" else "wrong",
        work / "cell_sent" if route.endswith("slow") else None,
    )
    worker.llm_client = model
    dataset = RLHFDataset([str(parquet)], worker.tokenizer, cfg.data)
    rows = [dataset[i] for i in range(len(dataset))]
    chosen = [r for r in rows if _task_of(r) == "tiny-csv"]
    batch = DataProto.from_single_dict(collate_fn(chosen * 2))  # two rollouts of one task
    out = await worker.generate_sequences(batch)
    nt = out.non_tensor_batch
    await asyncio.sleep(0.5)  # let a session closed as its trajectory ended finish closing
    ready = httpx.get(f"{server}/ready", timeout=10).json()
    masks = out.batch["response_mask"].tolist()
    result = {
        "agent_names": [str(a) for a in batch.non_tensor_batch["agent_name"]],
        "tools": sorted(t.name for t in worker.tools),
        "response_mask_sums": out.batch["response_mask"].sum(dim=1).tolist(),
        "responses": [
            worker.tokenizer.decode([t for t, m in zip(ids, mask) if m])
            for ids, mask in zip(out.batch["responses"].tolist(), masks)
        ],
        "whole": [worker.tokenizer.decode(ids) for ids in out.batch["input_ids"].tolist()],
        "num_turns": nt["__num_turns__"].tolist(),
        "prompts_seen": model.prompts,
        "request_ids": model.request_ids,
        "live_sessions_after": ready["live_sessions"],
    }
    if "rm_scores" in out.batch.keys():
        result["rm_scores"] = out.batch["rm_scores"].sum(dim=1).tolist()
    for key in (
        "env_end_reason",
        "env_task_id",
        "env_tool_calls",
        "env_malformed_calls",
        "env_resumes",
    ):
        if key in nt:
            result[key] = [_plain(v) for v in nt[key]]
    if route == "agent_loop":  # a row that names no episode: a clear error, no made-up score
        bare = dict(chosen[0], extra_info={"index": 0})
        try:
            await worker.generate_sequences(DataProto.from_single_dict(collate_fn([bare])))
            result["bad_row_error"] = None
        except Exception as exc:
            result["bad_row_error"] = f"{type(exc).__name__}: {exc}"
    if route == "tools":
        score = get_custom_reward_fn(cfg)  # veRL's own loader of the reward function
        result["tool_rewards"] = [list(v) for v in nt["tool_rewards"]]
        result["scores"] = [
            score(
                data_source="analyst_env",
                solution_str="",
                ground_truth="",
                extra_info={"tool_rewards": list(v)},
            )
            for v in nt["tool_rewards"]
        ]
    return result


def _task_of(row: dict) -> str | None:
    info = row.get("extra_info") or {}
    if info.get("task_id"):
        return info["task_id"]
    kwargs = info.get("tools_kwargs") or {}
    first = next(iter(kwargs.values()), {}) or {}
    return (first.get("create_kwargs") or {}).get("task_id")


def _plain(value):
    return value.item() if hasattr(value, "item") else value


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    server_url, model_path, work_dir, which = sys.argv[1:5]
    loop = sys.argv[5] if len(sys.argv) > 5 else server_url
    print(json.dumps(asyncio.run(main(server_url, model_path, Path(work_dir), which, loop))))
