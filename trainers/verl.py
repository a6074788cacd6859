"""Train on an analyst_env server with veRL: an agent loop that plays one episode per trajectory.

veRL (``verl`` 0.9) runs each trajectory through an agent loop chosen by the dataset
row's ``agent_name``. :class:`AnalystAgentLoop`, registered as ``analyst_env`` the way
veRL registers its own loops, opens a session on the server, resets into the row's
task, renders the task and the server's tools with the model's chat template, and
plays the model's ``<tool_call>`` blocks until the server ends the episode
(``final_answer`` or its step limit), the model calls no tool, the turn limit or the
response budget. Tokens go through veRL's own continuous-token builder (assistant
tokens trained, tool results masked out), and the trajectory's score is the server's
reward: veRL then skips its reward function for it.

Enable it with the agent-loop YAML this package ships (``verl_configs/agent_loop.yaml``,
which names the server) and dataset rows from :func:`export_parquet`::

    actor_rollout_ref.rollout.agent.agent_loop_config_path=agent_loop.yaml
    data.train_files=analyst_train.parquet   # rows carry agent_name=analyst_env

For veRL's built-in tool loop instead, see ``analyst_env.trainers.verl_tools``.
"""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
    register,
)
from verl.utils.profiler import simple_timer

from analyst_env.client.analyst_client import AnalystEnv
from analyst_env.client.endpoints import split_urls
from analyst_env.models import CallToolAction
from analyst_env.prompts import SYSTEM_PROMPT, openai_tools, task_prompt
from analyst_env.trainers.scenario import AnalystScenario, EpisodeStartError
from analyst_env.trainers.tool_calls import parse_tool_calls
from analyst_env.trainers.verl_rows import AGENT_NAME, dataset_rows, export_parquet

__all__ = ["AGENT_NAME", "AnalystAgentLoop", "dataset_rows", "export_parquet"]


@register(AGENT_NAME)
class AnalystAgentLoop(AgentLoopBase):
    """One trajectory = one episode on an analyst_env server, scored by the server.

    veRL builds one per trajectory with ``hydra.utils.instantiate``; the entry of the
    agent-loop YAML adds the keyword arguments below.

    Args:
        base_url: The server, or several replicas (comma-separated): each episode goes to
            the least-loaded one. A row's ``extra_info.base_url`` wins over it.
        token: Bearer token, if the server requires one.
        max_turns: Model turns before the trajectory stops (reward 0 unless the server
            ended the episode first); default ``multi_turn.max_assistant_turns``, else 20.
        message_timeout_s: How long a single reset or step may take on the server.
    """

    def __init__(
        self,
        *args: Any,
        base_url: str | None = None,
        token: str | None = None,
        max_turns: int | None = None,
        message_timeout_s: float = 300.0,
        **kwargs: Any,
    ) -> None:
        kwargs.pop("tools", None)  # veRL's tool list: this loop plays the server's own tools
        kwargs.pop("name", None)  # the YAML entry's name, passed along by hydra
        super().__init__(*args, **kwargs)
        self.base_url = base_url
        self.headers = {"Authorization": f"Bearer {token}"} if token else None
        configured = self.rollout_config.multi_turn.get("max_assistant_turns")
        self.max_turns = int(max_turns or configured or 20)
        self.message_timeout_s = message_timeout_s
        self.response_length = int(self.rollout_config.response_length)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        """Play the row's episode: ``raw_prompt`` (its empty user turn gets the task) and
        ``extra_info`` (``task_id``, or ``split`` and ``index``; ``seed``; ``base_url``)."""
        extra_info = dict(kwargs.get("extra_info") or {})
        url = extra_info.get("base_url") or self.base_url
        if not url:
            raise ValueError(
                "AnalystAgentLoop needs the server URL: base_url in the agent-loop YAML entry "
                "or extra_info.base_url in the dataset row"
            )
        scenario = _scenario(extra_info)
        async with AnalystEnv(
            base_url=",".join(split_urls(url)),
            headers=self.headers,
            message_timeout_s=self.message_timeout_s,
        ) as env:
            first = await env.reset(**scenario.reset_options())
            obs = first.observation
            if first.done:
                raise EpisodeStartError(obs.message or "the episode failed to start")
            episode = _Episode(self, env, list(kwargs.get("raw_prompt") or []), obs)
            await episode.play(sampling_params)
            episode.resumes = env.resumes
        return episode.output()


def _scenario(extra_info: dict[str, Any]) -> AnalystScenario:
    """The episode a row names: its task, the curriculum's pick for its client, or (a split
    made on demand) its split and index."""
    try:
        return AnalystScenario.from_fields(extra_info)
    except ValueError:
        raise ValueError(
            "the dataset row's extra_info names no episode: it needs task_id, client_id (a "
            "--curriculum server), or split and index (rows from "
            "analyst_env.trainers.verl.export_parquet have them)"
        ) from None


class _Episode:
    """The token and message state of one trajectory while it plays on the server."""

    def __init__(self, loop: AnalystAgentLoop, env: AnalystEnv, prompt: list, obs: Any) -> None:
        self.loop, self.env = loop, env
        text = task_prompt(obs.instruction, obs.files)
        messages = [dict(m) for m in prompt] or [{"role": "system", "content": SYSTEM_PROMPT}]
        if messages[-1]["role"] == "user" and not str(messages[-1].get("content") or "").strip():
            messages[-1]["content"] = text
        else:
            messages.append({"role": "user", "content": text})
        self.messages = messages
        self.tools = openai_tools(obs.available_tools)
        self.ids: list[int] = []
        self.mask: list[int] = []
        self.logprobs: list[float] = []
        self.metrics: dict[str, Any] = {}
        self.reward = 0.0
        self.turns = self.tool_turns = self.calls = self.malformed = 0
        self.end_reason = "max_turns"
        self.resumes = 0  # dropped connections resumed during the episode
        self.fields = {"task_id": obs.task_id, "episode_id": obs.episode_id}

    async def play(self, sampling_params: dict[str, Any]) -> None:
        loop = self.loop
        self.ids = await loop.ct_build_initial_tokens(self.messages, tools=self.tools)
        request_id = uuid4().hex  # one per trajectory: its turns stay on one rollout server
        while self.turns < loop.max_turns:
            with simple_timer("generate_sequences", self.metrics):
                out = await loop.server_manager.generate(
                    request_id=request_id, prompt_ids=self.ids, sampling_params=sampling_params
                )
            merged, self.mask, logprobs = await loop.ct_merge_assistant_token(
                self.ids,
                out.token_ids,
                self.mask,
                self.logprobs if (self.logprobs or out.log_probs) else None,
                assistant_logprobs=out.log_probs or None,
            )
            self.ids, self.logprobs = merged.token_ids, logprobs or []
            self.turns += 1
            if len(self.mask) >= loop.response_length:
                self.end_reason = "response_length"
                return
            text = loop.tokenizer.decode(out.token_ids, skip_special_tokens=False)
            calls = parse_tool_calls(text)
            if not calls:
                self.end_reason = "no_tool_call"
                return
            if await self._play_calls(text, calls):
                return
        self.end_reason = "max_turns"

    async def _play_calls(self, text: str, calls: list[dict[str, Any] | str]) -> bool:
        """Play one turn's calls and add the results to the context; True if the episode ended."""
        self.messages.append(_assistant_message(text, calls))  # its tokens are in already
        before = list(self.messages)
        with simple_timer("tool_calls", self.metrics):
            for call in calls:
                self.calls += 1
                if isinstance(call, str):
                    self.malformed += 1
                    reply = f"Error: {call}"
                else:
                    # an action, not call_tool(name, **arguments): an argument may be called "name"
                    action = CallToolAction(tool_name=call["name"], arguments=call["arguments"])
                    result = await self.env.step(action)
                    if result.done:
                        self.reward = float(result.reward or 0.0)
                        meta = result.observation.metadata or {}
                        self.end_reason = meta.get("end_reason") or "final_answer"
                        return True
                    reply = result.observation.text
                self.messages.append({"role": "tool", "content": reply})
        loop = self.loop
        merged, mask, logprobs = await loop.ct_merge_context_msg(
            before,
            self.messages,
            self.ids,
            self.mask,
            self.logprobs or None,
            tools=self.tools,
        )
        if len(mask) >= loop.response_length:
            self.end_reason = "response_length"
            return True
        self.ids, self.mask = merged.token_ids, mask
        if self.logprobs:
            self.logprobs = logprobs or []
        self.tool_turns += 1
        return False

    def output(self) -> AgentLoopOutput:
        """The trajectory for veRL, its score the server's reward (so no reward function runs)."""
        n = len(self.mask)
        cut = self.loop.response_length
        return AgentLoopOutput(
            prompt_ids=self.ids[: len(self.ids) - n],
            response_ids=self.ids[len(self.ids) - n :][:cut],
            response_mask=self.mask[:cut],
            response_logprobs=self.logprobs[:cut] if self.logprobs else None,
            reward_score=self.reward,
            num_turns=self.turns + self.tool_turns + 1,
            metrics=AgentLoopMetrics(
                generate_sequences=self.metrics.get("generate_sequences", 0.0),
                tool_calls=self.metrics.get("tool_calls", 0.0),
            ),
            extra_fields={
                "env_task_id": self.fields["task_id"],
                "env_episode_id": self.fields["episode_id"],
                "env_end_reason": self.end_reason,
                "env_tool_calls": self.calls,
                "env_malformed_calls": self.malformed,
                "env_resumes": self.resumes,
            },
        )


def _assistant_message(text: str, calls: list[dict[str, Any] | str]) -> dict[str, Any]:
    """The model's turn as a chat message, so the template renders its calls back as written."""
    content = text.split("<tool_call>", 1)[0].strip()
    tool_calls = [
        {"type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
        for c in calls
        if isinstance(c, dict)
    ]
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return message
