"""Train on an analyst_env server with OpenRLHF (``--train.agent_func_path``).

OpenRLHF loads the ``.py`` file given to ``--train.agent_func_path``, takes its
class named ``AgentExecutor`` (a subclass of ``AgentExecutorBase``) and builds
it with no arguments, once per vLLM engine. This module is such a file: point
the flag at it and set ``ANALYST_ENV_URL`` (and ``ANALYST_ENV_TOKEN``) where the
engines run, or write a three-line file that subclasses
:class:`AnalystAgentExecutor` and sets ``base_url``.

Each sample is one episode. OpenRLHF's ``MultiTurnAgentExecutor`` keeps the
token stream; the episode instance resets a fresh session into the task named by
the dataset row's label (a task id, or JSON ``{"task_id", "seed"}`` or
``{"split", "index", "seed"}``), replaces the row's prompt with the task as
every adapter shows it (the ``<tools>`` system prompt and the task text, in the
tokenizer's chat template), then plays each turn's
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks on the
server and answers them with a ``<tool_response>`` user turn. The reward is the
server's verdict, given on the turn that ends the episode (``final_answer`` or
the server's step limit); a turn without a tool call, the turn limit, or
OpenRLHF's length budget ends it with reward 0. The session is closed when the
sample ends, whichever way.
"""

from __future__ import annotations

import copy
import json
import os
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor

from analyst_env.client.analyst_client import AnalystEnv
from analyst_env.client.endpoints import split_urls
from analyst_env.models import CallToolAction
from analyst_env.prompts import hermes_tools_prompt, task_prompt
from analyst_env.trainers.scenario import AnalystScenario
from analyst_env.trainers.tool_calls import parse_tool_calls, tool_responses_text

__all__ = [
    "AgentExecutor",
    "AnalystAgentExecutor",
    "AnalystAgentInstance",
    "export_jsonl",
    "read_label",
]

_PLACEHOLDER = "\x00analyst-env-turn\x00"


def read_label(label: Any) -> AnalystScenario:
    """The episode a dataset row's label names.

    A task id (``"tiny-csv"``), or a JSON object of reset options:
    ``{"task_id": ..., "seed": ...}``, ``{"split": ..., "index": ..., "seed": ...}`` or, for
    a ``--curriculum`` server, ``{"client_id": ..., "curriculum_group": ...}`` (the samples
    of one label play the one task the server picks for its group).
    """
    if isinstance(label, str) and label.lstrip().startswith("{"):
        label = json.loads(label)
    if isinstance(label, dict):
        unknown = set(label) - {
            "task_id", "split", "index", "seed", "client_id", "curriculum_group"
        }  # fmt: skip
        if unknown:
            raise ValueError(f"unknown keys in the label: {sorted(unknown)}")
        scenario = AnalystScenario(**label)
    elif isinstance(label, str) and label.strip():
        scenario = AnalystScenario(task_id=label.strip())
    else:
        raise ValueError(f"the label must name a task (a task id or JSON), not {label!r}")
    scenario.reset_options()  # refuses a label that names no episode
    return scenario


class ChatTurns:
    """The text of one turn boundary in ``tokenizer``'s chat template.

    OpenRLHF appends the environment's feedback to the token stream verbatim, so
    the feedback must carry the template's turn markers: the end of the model's
    turn is its own end-of-turn token (already generated), then a user turn
    holding the tool responses, then the opening of the next assistant turn.
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def opening(self, system: str, user: str) -> str:
        """The prompt: a system turn, a user turn, and the start of the assistant's."""
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        return str(
            self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        )

    def feedback(self, user: str) -> str:
        """What follows an assistant turn that ended with its end-of-turn token: ``user``'s turn
        and the opening of the next assistant turn."""
        messages = [
            {"role": "user", "content": "-"},
            {"role": "assistant", "content": _PLACEHOLDER},
            {"role": "user", "content": user},
        ]
        text = str(
            self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        )
        tail = text[text.index(_PLACEHOLDER) + len(_PLACEHOLDER) :]
        eos = self.tokenizer.eos_token or ""
        return tail[len(eos) :] if eos and tail.startswith(eos) else tail


class AnalystAgentInstance(AgentInstanceBase):
    """One sample's episode: reset into the label's task, then play each turn's tool calls."""

    def __init__(self, executor: AnalystAgentExecutor, turns: ChatTurns) -> None:
        self.executor = executor
        self.turns = turns
        self._stack = AsyncExitStack()
        self._env: AnalystEnv | None = None
        self.reward = 0.0
        self.done = False
        self.logs = {"turns": 0, "tool_calls": 0, "malformed_calls": 0}

    async def reset(self, states: dict, **kwargs: Any) -> dict:
        """Open a session, reset into the label's task; the observation is the templated task."""
        scenario = read_label(states.get("label"))
        ex = self.executor
        headers = {"Authorization": f"Bearer {ex.token}"} if ex.token else None
        env = AnalystEnv(
            base_url=ex.base_url, headers=headers, message_timeout_s=ex.message_timeout_s
        )
        self._env = env
        await self._stack.enter_async_context(env)
        obs = (await env.reset(**scenario.reset_options())).observation
        if obs.done:
            raise RuntimeError(obs.message or "the episode failed to start")
        system = hermes_tools_prompt(obs.available_tools)
        return {"observation": self.turns.opening(system, task_prompt(obs.instruction, obs.files))}

    async def step(self, state_dict: dict, **kwargs: Any) -> dict:
        """Play the turn's ``<tool_call>`` blocks; no call (or the turn limit) ends the episode."""
        import torch

        assert self._env is not None, "step before reset"
        self.logs["turns"] += 1
        calls = parse_tool_calls(state_dict["action_text"])
        responses = []
        for call in calls:
            self.logs["tool_calls"] += 1
            if isinstance(call, str):
                self.logs["malformed_calls"] += 1
                responses.append(f"Error: {call}")
                continue
            result = await self._env.step(
                CallToolAction(tool_name=call["name"], arguments=call["arguments"])
            )
            responses.append(result.observation.text)
            if result.done:
                self.done = True
                self.reward = float(result.reward or 0.0)
                break
        done = self.done or not calls or self.logs["turns"] >= self.executor.max_turns
        feedback = "" if done else self.turns.feedback(tool_responses_text(responses))
        reward = self.reward if done else 0.0
        return {
            "rewards": torch.tensor(reward),
            "scores": reward,
            "environment_feedback": feedback,
            "done": done,
            "extra_logs": {**self.logs, "solved": float(self.reward >= 1.0)},
        }

    async def close(self) -> None:
        """End the session (idempotent; the server may already have dropped it)."""
        self._env = None
        try:
            await self._stack.aclose()
        except Exception:
            pass


class AnalystAgentExecutor(MultiTurnAgentExecutor):
    """OpenRLHF's multi-turn executor playing episodes on an analyst_env server.

    Class attributes (set them in a subclass, or through the environment):

    - ``base_url``: the server, or several replicas comma-separated (each episode goes
      to the least-loaded one); default ``$ANALYST_ENV_URL``.
    - ``token``: bearer token; default ``$ANALYST_ENV_TOKEN``.
    - ``max_turns``: model turns before the episode stops with reward 0.
    - ``message_timeout_s``: how long one reset or tool call may take on the server.
    """

    base_url: str | None = None
    token: str | None = None
    max_turns: int = 20
    message_timeout_s: float = 300.0

    def __init__(self) -> None:
        super().__init__(AnalystAgentInstance)
        base_url = self.base_url or os.environ.get("ANALYST_ENV_URL")
        if not base_url:
            raise RuntimeError(
                f"{type(self).__name__} needs the analyst_env server: set base_url in a subclass "
                "or ANALYST_ENV_URL in the environment of OpenRLHF's vLLM engines"
            )
        self.base_url = ",".join(split_urls(base_url))
        self.token = self.token or os.environ.get("ANALYST_ENV_TOKEN") or None
        self._turns: dict[int, ChatTurns] = {}

    async def execute(
        self,
        prompt: Any,
        label: Any,
        sampling_params: Any,
        max_length: int,
        hf_tokenizer: Any,
        llm_engine: Any,
        images: Any = None,
    ) -> dict:
        """OpenRLHF's multi-turn loop on one episode, its session closed when the sample ends."""
        turns = self._turns.setdefault(id(hf_tokenizer), ChatTurns(hf_tokenizer))
        made: list[AnalystAgentInstance] = []

        def instance() -> AnalystAgentInstance:
            made.append(AnalystAgentInstance(self, turns))
            return made[-1]

        # the base builds its instance with no arguments; a copy per sample keeps concurrent
        # samples apart
        runner = copy.copy(self)
        runner.agent_instance_cls = instance
        try:
            return await MultiTurnAgentExecutor.execute(
                runner, prompt, label, sampling_params, max_length, hf_tokenizer, llm_engine, images
            )
        finally:
            for episode in made:
                await episode.close()


def export_jsonl(base_url: str, out: str | Path, split: str = "train", **options: Any) -> Path:
    """Write OpenRLHF prompt rows for a split of the server: ``input`` (a short name of the
    task, for OpenRLHF's logs) and ``label`` (the JSON the episode resets from).

    Options as :func:`analyst_env.trainers.art.scenarios` (``dataset``, ``seed``,
    ``num_tasks``, ``start``, ``token``), or ``client_id`` and ``num_tasks`` for a
    ``--curriculum`` server (labels that name the client and a group each). Train with
    ``--data.input_key input --data.label_key label``; the prompt the model reads is
    rebuilt at reset.
    """
    from analyst_env.trainers.art import curriculum_scenarios, scenarios

    client_id = options.pop("client_id", None)
    if client_id is not None and not options.get("num_tasks"):
        raise ValueError("curriculum labels need num_tasks (how many rows to write)")
    chosen = (
        scenarios(base_url, split, **options)
        if client_id is None
        else curriculum_scenarios(client_id, options["num_tasks"], options.get("seed"))
    )
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for scenario in chosen:
            where = scenario.reset_options()
            name = (
                where.get("task_id")
                or where.get("curriculum_group")
                or f"{where['split']}[{where['index']}]"
            )
            row = {"input": f"analyst_env task {name}", "label": json.dumps(where)}
            f.write(json.dumps(row) + "\n")
    return path


class AgentExecutor(AnalystAgentExecutor):
    """The class OpenRLHF looks for in this file: the server comes from ``ANALYST_ENV_URL``."""
