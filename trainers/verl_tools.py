"""analyst_env's tools as veRL ``BaseTool`` classes, for veRL's built-in ``tool_agent`` loop.

For users who keep veRL's own ``ToolAgentLoop`` (``agent_name: tool_agent``) rather than
``analyst_env.trainers.verl.AnalystAgentLoop``. Each server tool is one entry of a tool
YAML (``verl_configs/tools.yaml``) naming :class:`AnalystTool`; its schema is read from
the server when the entry gives none.

veRL 0.9 calls ``create``, ``execute`` and ``release`` once per tool call, with a new
instance id each time, so the episode cannot live on an instance: it lives on the
trajectory. The first call of a trajectory opens a session and resets into the task its
row names (``tools_kwargs.<tool>.create_kwargs``: ``task_id`` or ``split`` and
``index``, ``seed``); later calls, whichever tool, play on that session. The episode
ends when the server ends it (``final_answer`` or its step limit): that call's
``release`` closes the session. A trajectory that stops first (turn or length limit)
has its session closed when veRL drops the trajectory's state.

Scoring: ``execute`` returns the server's reward as the step reward of the call that
ended the episode (0.0 for every other call); veRL does not use step rewards by itself,
so point ``reward.custom_reward_function`` at :func:`compute_score`
(``path: pkg://analyst_env.trainers.verl_tools``, ``name: compute_score``).
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

from analyst_env.client.analyst_client import AnalystEnv
from analyst_env.client.endpoints import split_urls
from analyst_env.models import CallToolAction
from analyst_env.prompts import openai_tools
from analyst_env.trainers.scenario import AnalystScenario, EpisodeStartError
from analyst_env.trainers.verl_rows import tool_dataset_rows

__all__ = ["AnalystTool", "compute_score", "tool_dataset_rows"]

_EPISODE_ATTR = "_analyst_env_episode"


class _TrajectoryEpisode:
    """The session one trajectory plays on, shared by every tool it calls."""

    def __init__(self, client: AnalystEnv) -> None:
        self.client: AnalystEnv | None = client
        self.done = False
        self.reward = 0.0
        self.lock = asyncio.Lock()  # veRL may run a turn's calls concurrently

    async def close(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            try:
                await client.close()
            except Exception:  # the server may already have dropped the session
                pass


def _close_later(episode: _TrajectoryEpisode, loop: asyncio.AbstractEventLoop) -> None:
    """Close a trajectory's session once veRL has dropped the trajectory (from a finalizer)."""
    if episode.client is None or loop.is_closed():
        return
    try:
        loop.call_soon_threadsafe(lambda: loop.create_task(episode.close()))
    except RuntimeError:  # the loop is shutting down: the server's idle timeout reclaims it
        pass


class AnalystTool(BaseTool):
    """One analyst_env tool in veRL's tool registry.

    ``config`` (the YAML entry's ``config``): ``type: native``, ``base_url`` (one server
    or comma-separated replicas), ``tool_name`` (when the entry has no ``tool_schema``),
    optional ``token`` and ``message_timeout_s``.
    """

    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema | None) -> None:
        base_url = config.get("base_url")
        if not base_url:
            raise ValueError("AnalystTool needs config.base_url: the analyst_env server's URL")
        self.base_url = ",".join(split_urls(base_url))
        token = config.get("token")
        self.headers = {"Authorization": f"Bearer {token}"} if token else None
        self.message_timeout_s = float(config.get("message_timeout_s", 300.0))
        super().__init__(config, tool_schema)

    def get_openai_tool_schema(self) -> OpenAIFunctionToolSchema:
        """The entry's schema, else the server's own for ``config.tool_name``."""
        if getattr(self, "tool_schema", None):
            return self.tool_schema
        from analyst_env.trainers.tool_catalog import fetch_tool_specs

        name = self.config.get("tool_name")
        if not name:
            raise ValueError("AnalystTool needs config.tool_name when the entry has no tool_schema")
        specs = {s["name"]: s for s in fetch_tool_specs(self.base_url, self.headers)}
        if name not in specs:
            raise ValueError(f"the server has no tool {name!r}; its tools: {sorted(specs)}")
        return OpenAIFunctionToolSchema.model_validate(openai_tools([specs[name]])[0])

    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[ToolResponse, float, dict]:
        """Play the call on the trajectory's episode; the reward is nonzero only on its end."""
        agent_data = kwargs.get("agent_data")
        if agent_data is None:
            raise RuntimeError("AnalystTool runs inside veRL's tool agent loop (no agent_data)")
        episode = await self._episode(agent_data)
        async with episode.lock:
            if episode.done or episode.client is None:
                return ToolResponse(text="Error: the episode is over."), 0.0, {}
            action = CallToolAction(tool_name=self.name, arguments=dict(parameters))
            result = await episode.client.step(action)
            if result.done:
                episode.done = True
                episode.reward = float(result.reward or 0.0)
                await episode.close()
                return ToolResponse(text=result.observation.text), episode.reward, {"done": 1}
            return ToolResponse(text=result.observation.text), 0.0, {}

    async def _episode(self, agent_data: Any) -> _TrajectoryEpisode:
        """The trajectory's episode; the first call opens it (reset into the row's task)."""
        episode = getattr(agent_data, _EPISODE_ATTR, None)
        if episode is not None:
            return episode
        place = _create_kwargs(agent_data.tools_kwargs or {}, self.name)
        client = AnalystEnv(
            base_url=self.base_url, headers=self.headers, message_timeout_s=self.message_timeout_s
        )
        episode = _TrajectoryEpisode(client)
        setattr(agent_data, _EPISODE_ATTR, episode)
        weakref.finalize(agent_data, _close_later, episode, asyncio.get_running_loop())
        async with episode.lock:  # a call of the same turn waits for the reset
            try:
                first = await client.reset(**place.reset_options())
            except BaseException:
                episode.done = True
                await episode.close()
                raise
            if first.done:
                episode.done = True
                await episode.close()
                raise EpisodeStartError(first.observation.message or "the episode failed to start")
        return episode


def _create_kwargs(tools_kwargs: dict[str, Any], name: str) -> AnalystScenario:
    """The episode a row names in ``tools_kwargs`` (this tool's entry, else any tool's)."""
    entries = [tools_kwargs.get(name)] + list(tools_kwargs.values())
    for entry in entries:
        try:
            return AnalystScenario.from_fields(dict((entry or {}).get("create_kwargs") or {}))
        except ValueError:
            continue
    raise ValueError(
        "the dataset row names no episode: put task_id (or split and index, or a --curriculum "
        "server's client_id) and seed in extra_info.tools_kwargs.<tool>.create_kwargs "
        "(tool_dataset_rows does)"
    )


def compute_score(
    data_source: Any = None,
    solution_str: Any = None,
    ground_truth: Any = None,
    extra_info: dict[str, Any] | None = None,
    **_: Any,
) -> float:
    """veRL reward function for the tool route: the server's reward for the trajectory.

    ``extra_info["tool_rewards"]`` holds each call's step reward; only the call that
    ended the episode carries one, so the sum is the episode's reward (0.0 if the model
    never ended it).
    """
    rewards = (extra_info or {}).get("tool_rewards")
    return float(sum(float(r) for r in rewards)) if rewards is not None else 0.0
