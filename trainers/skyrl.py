"""Train on an analyst_env server with SkyRL (``skyrl_gym`` text environments).

SkyRL's generator passes the model's raw text to the environment and never
hands tools to the chat template, so the environment does both jobs:
:func:`export_parquet` writes dataset rows whose system prompt lists the tools
(Hermes ``<tools>`` block), and :class:`AnalystSkyRLEnv` parses
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` from each turn,
plays it on the server and answers with a ``<tool_response>`` user message.
The reward is the episode's outcome reward, given on the turn that ends it.

Usage inside SkyRL's Ray entrypoint::

    from analyst_env.trainers.skyrl import register
    register()          # env_class "analyst_env"
    # rows from export_parquet(...); extras carry task_id, seed and the server URL
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

from analyst_env.client.analyst_client import AnalystEnv
from analyst_env.prompts import hermes_tools_prompt, task_prompt
from analyst_env.trainers.tool_calls import parse_tool_calls, tool_responses_text

__all__ = ["AnalystSkyRLEnv", "export_parquet", "parse_tool_calls", "register"]

ENV_CLASS = "analyst_env"


class AnalystSkyRLEnv(BaseTextEnv):
    """One trajectory's episode on an analyst_env server, for ``SkyRLGymGenerator``.

    Args:
        env_config: SkyRL's ``environment.skyrl_gym.analyst_env`` config (may hold ``base_url``).
        extras: The dataset row's columns: ``task_id``, ``seed``, ``base_url`` (wins over
            ``env_config``), ``token`` and ``max_turns`` (injected by the generator), and
            ``extra_info``: ``split`` and ``index`` (a split made on demand), or
            ``client_id`` and ``curriculum_group`` (a ``--curriculum`` server picks the task
            for that client, one task for every sample of a row's group).
    """

    def __init__(self, env_config: Any = None, extras: dict[str, Any] | None = None) -> None:
        super().__init__()
        extras = dict(extras or {})
        config = dict(env_config or {})
        self.base_url = extras.get("base_url") or config.get("base_url")
        if not self.base_url:
            raise ValueError(
                "AnalystSkyRLEnv needs the server URL: a 'base_url' column or env_config.base_url"
            )
        self.task_id = extras.get("task_id")
        place = extras.get("extra_info") or {}
        # a split made on demand (``procedural``) names its tasks by place, not by id
        self.split, self.index = place.get("split"), place.get("index")
        self.client_id = place.get("client_id")
        self.group = place.get("curriculum_group")
        placed = self.split is not None and self.index is not None
        if not self.task_id and not placed and not self.client_id:
            raise ValueError(
                "AnalystSkyRLEnv needs a 'task_id' column in the dataset row (or, for a split "
                "made on demand, extra_info with 'split' and 'index'; for a --curriculum "
                "server, extra_info with 'client_id')"
            )
        self.seed = extras.get("seed")
        self.max_turns = int(extras.get("max_turns") or config.get("max_turns") or 20)
        token = extras.get("token") or config.get("token")
        self._headers = {"Authorization": f"Bearer {token}"} if token else None
        self._client: Any = None
        self.reward = 0.0
        self.done = False

    def init(self, prompt: Any) -> tuple[list[dict[str, str]], dict[str, Any]]:
        """Open a session and reset into the task; the prompt's user turn gets the task text."""
        if isinstance(prompt, str):  # parquet may hand the conversation over as JSON text
            prompt = json.loads(prompt)
        self._client = AnalystEnv(
            base_url=self.base_url, headers=self._headers, message_timeout_s=300
        ).sync()
        self._client.connect()
        where: dict[str, Any] = {"task_id": self.task_id}
        if not self.task_id and self.index is not None:
            where = {"split": self.split, "index": int(self.index)}
        elif not self.task_id:
            where = {"client_id": self.client_id, "curriculum_group": self.group}
        obs = self._client.reset(seed=self.seed, **where).observation
        text = task_prompt(obs.instruction, obs.files)
        messages = [dict(m) for m in prompt]
        if messages and messages[-1]["role"] == "user" and not messages[-1]["content"].strip():
            messages[-1]["content"] = text
        else:
            messages.append({"role": "user", "content": text})
        if obs.done:
            self.done = True
        self.task_id = obs.task_id
        return messages, {"task_id": obs.task_id, "episode_id": obs.episode_id}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        """Play the tool calls in the model's turn; no call (or the turn limit) ends the episode."""
        self.turns += 1
        calls = parse_tool_calls(action) if not self.done else []
        responses = []
        for call in calls:
            if self.done:
                break
            if isinstance(call, str):
                responses.append(f"Error: {call}")
                continue
            result = self._client.call_tool(call["name"], **call["arguments"])
            responses.append(result.observation.text)
            if result.done:
                self.done = True
                self.reward = float(result.reward or 0.0)
        done = self.done or not calls or self.turns >= self.max_turns
        observations = []
        if responses and not done:
            observations = [{"role": "user", "content": tool_responses_text(responses)}]
        return BaseTextEnvStepOutput(
            observations=observations,
            reward=self.reward if done else 0.0,
            done=done,
            metadata={"task_id": self.task_id, "tool_calls": len(calls)},
            postprocessed_action=None,
        )

    def get_metrics(self) -> dict[str, Any]:
        return {"reward": self.reward, "solved": float(self.reward >= 1.0), "turns": self.turns}

    def close(self) -> None:
        """End the session (idempotent)."""
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # the server may already have dropped it
                pass


def register(env_id: str = ENV_CLASS) -> None:
    """Register :class:`AnalystSkyRLEnv` with ``skyrl_gym`` (call inside SkyRL's Ray entrypoint)."""
    from skyrl_gym.envs import register as skyrl_register
    from skyrl_gym.envs.registration import registry

    if env_id not in registry:
        skyrl_register(id=env_id, entry_point="analyst_env.trainers.skyrl:AnalystSkyRLEnv")


def dataset_rows(
    base_url: str,
    split: str = "train",
    *,
    dataset: str | None = None,
    seed: int = 0,
    num_tasks: int | None = None,
    start: int = 0,
    client_id: str | None = None,
) -> list[dict[str, Any]]:
    """SkyRL dataset rows for a split of the server: ``prompt``, ``env_class``, ``reward_spec``,
    extras.

    The system prompt lists the server's tools; the empty user turn is filled by ``init``.
    ``num_tasks`` and ``start`` pick a range (required for a split made on demand, whose
    rows then carry no ``task_id``: ``init`` resets by ``extra_info``'s split and index).
    With ``client_id``, for a server started with ``--curriculum``: ``num_tasks`` rows that
    name no task, so the server picks each episode's task for that client as it learns; each
    row names its own ``curriculum_group``, so the samples SkyRL draws of one row in a step
    get one task (and the row's next epoch a new one).
    """
    from analyst_env.trainers.tool_catalog import fetch_tool_specs
    from analyst_env.trainers.trl import AnalystSpec

    if client_id is not None and not num_tasks:
        raise ValueError("curriculum rows need num_tasks (how many episodes to play)")
    system = hermes_tools_prompt(fetch_tool_specs(base_url))

    def row(task_id: str | None, source: str, extra_info: dict[str, Any]) -> dict[str, Any]:
        return {
            "data_source": source,
            "prompt": [{"role": "system", "content": system}, {"role": "user", "content": ""}],
            "env_class": ENV_CLASS,
            "reward_spec": {"method": "rule", "ground_truth": None},
            "task_id": task_id,
            "seed": seed,
            "base_url": base_url,
            "extra_info": extra_info,
        }

    if client_id is not None and num_tasks:
        run = uuid.uuid4().hex[:8]
        return [
            row(None, ENV_CLASS, {"client_id": client_id, "curriculum_group": f"{run}-{n}"})
            for n in range(num_tasks)
        ]
    spec = AnalystSpec(
        base_url, dataset=dataset, split=split, seed=seed, num_tasks=num_tasks, start=start
    )
    return [
        row(
            task["id"],
            (task.get("metadata") or {}).get("source", ENV_CLASS),
            {"split": split, "index": task.get("index")},
        )
        for task in spec.tasks()
    ]


def export_parquet(base_url: str, out: str | Path, split: str = "train", **options: Any) -> Path:
    """Write :func:`dataset_rows` to a parquet file SkyRL's ``data.train_data`` reads; returns the
    path."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(dataset_rows(base_url, split, **options)), path)
    return path
