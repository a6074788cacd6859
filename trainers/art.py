"""Train on an analyst_env server with ART (OpenPipe's agent trainer, ``openpipe-art``).

ART leaves the episode to the user: a rollout function asks the model through
``model.openai_client()`` and returns an ``art.Trajectory`` whose reward is set.
:func:`make_rollout` builds that function for one server. Each rollout resets a
fresh session into its scenario, shows the model the task and the server's
tools as OpenAI function schemas (the same text every adapter shows,
``prompts``), plays the model's tool calls until the server ends the episode
(``final_answer`` or its step limit), the model calls no tool, or the turn
limit; assistant turns stay the OpenAI ``Choice`` objects ART trains on (with
the endpoint's logprobs), tool results go in as ``tool`` messages. The reward
is the server's verdict and nothing else::

    import art
    from analyst_env.trainers.art import make_rollout, scenarios

    rollout = make_rollout("http://127.0.0.1:8000")
    groups = await art.gather_trajectory_groups(
        [art.TrajectoryGroup(rollout(model, s) for _ in range(4)) for s in scenarios(url)],
        max_exceptions=4 * len(batch),
    )
    await backend.train(model, groups)

A rollout that cannot finish (the server or the model endpoint failed) raises
instead of returning a made-up reward, so ART counts it among the group's
exceptions; its session is closed either way. ``art`` is imported only inside
the rollout: importing this module needs only the client.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypedDict, Unpack

from analyst_env.client.analyst_client import AnalystEnv
from analyst_env.client.endpoints import split_urls
from analyst_env.models import CallToolAction
from analyst_env.prompts import SYSTEM_PROMPT, openai_tools, task_prompt
from analyst_env.trainers.scenario import AnalystScenario, EpisodeStartError

__all__ = [
    "AnalystScenario",
    "EpisodeStartError",
    "SplitOptions",
    "curriculum_scenarios",
    "make_rollout",
    "scenarios",
]


class SplitOptions(TypedDict, total=False):
    """Which tasks of a split the scenarios (or rows) name, and how to reach the server:
    ``trainers.trl.AnalystSpec``'s options, with its defaults. Every row builder
    (``scenarios``, ``verl_rows``) takes them as ``**options`` and passes them on."""

    dataset: str | None
    seed: int
    num_tasks: int | None
    start: int
    token: str | None


def scenarios(
    base_url: str,
    split: str = "train",
    **options: Unpack[SplitOptions],
) -> list[AnalystScenario]:
    """One scenario per task of a split of the server (``options``: ``SplitOptions``, as
    ``AnalystSpec`` takes them).

    A split made on demand (``procedural``) needs ``num_tasks``; its scenarios
    name places (split and index), so no task is made before its first reset.
    """
    from analyst_env.trainers.trl import AnalystSpec

    spec = AnalystSpec(base_url, split=split, **options)
    seed = options.get("seed", 0)
    return [
        AnalystScenario(task_id=t["id"], seed=seed)
        if t["id"] is not None
        else AnalystScenario(split=t["split"], index=t["index"], seed=seed)
        for t in spec.tasks()
    ]


def curriculum_scenarios(
    client_id: str, count: int, seed: int | None = None
) -> list[AnalystScenario]:
    """``count`` scenarios for a server started with ``--curriculum``: each names no task, so
    the server picks it for ``client_id`` as the model learns, and its own
    ``curriculum_group``, so the rollouts of one group play one task (and the scenario's
    next use, ten minutes on, a new one)."""
    run = uuid.uuid4().hex[:8]
    return [
        AnalystScenario(seed=seed, client_id=client_id, curriculum_group=f"{run}-{n}")
        for n in range(count)
    ]


def make_rollout(
    base_url: str,
    *,
    token: str | None = None,
    max_turns: int = 20,
    logprobs: bool = True,
    completion_options: Mapping[str, Any] | None = None,
    message_timeout_s: float = 300.0,
) -> Callable[[Any, AnalystScenario | Mapping[str, Any]], Awaitable[Any]]:
    """``async rollout(model, scenario) -> art.Trajectory`` bound to one server.

    Args:
        base_url: The server, or several replicas (comma-separated): each episode
            goes to the least-loaded one.
        token: Bearer token, if the server requires one.
        max_turns: Model turns before the rollout stops (reward 0 unless the server
            ended the episode first).
        logprobs: Ask the endpoint for token logprobs (ART trains only on assistant
            turns that carry them, unless told otherwise).
        completion_options: Extra arguments of ``chat.completions.create`` (e.g.
            ``temperature``, ``max_completion_tokens``).
        message_timeout_s: How long a single reset or step may take on the server.
    """
    urls = ",".join(split_urls(base_url))
    headers = {"Authorization": f"Bearer {token}"} if token else None
    extra = dict(completion_options or {})

    async def rollout(model: Any, scenario: AnalystScenario | Mapping[str, Any]) -> Any:
        """Play one episode of ``scenario`` with ``model``; the trajectory with its reward."""
        import art

        if not isinstance(scenario, AnalystScenario):
            scenario = AnalystScenario(**scenario)
        async with AnalystEnv(
            base_url=urls, headers=headers, message_timeout_s=message_timeout_s
        ) as env:
            first = await env.reset(**scenario.reset_options())
            obs = first.observation
            if first.done:
                raise EpisodeStartError(obs.message or "the episode failed to start")
            tools = openai_tools(obs.available_tools)
            trajectory = art.Trajectory(
                messages_and_choices=[
                    {"role": "system", "content": SYSTEM_PROMPT},
                    {"role": "user", "content": task_prompt(obs.instruction, obs.files)},
                ],
                tools=tools,
                metadata={
                    "task_id": obs.task_id,
                    "episode_id": obs.episode_id,
                    "seed": scenario.seed,
                },
            )
            await _play(env, model, trajectory, tools, max_turns, logprobs, extra)
        return trajectory.finish()

    return rollout


async def _play(
    env: AnalystEnv,
    model: Any,
    trajectory: Any,
    tools: list[dict[str, Any]],
    max_turns: int,
    logprobs: bool,
    extra: dict[str, Any],
) -> None:
    """Turn after turn: ask the model, play its tool calls, answer each with a tool message."""
    client = model.openai_client()
    metrics = {"turns": 0, "tool_calls": 0, "malformed_calls": 0}
    end_reason = "max_turns"
    while metrics["turns"] < max_turns:
        completion = await client.chat.completions.create(
            model=model.get_inference_name(),
            messages=trajectory.messages(),
            tools=tools,
            logprobs=logprobs,
            **extra,
        )
        choice = completion.choices[0]
        trajectory.messages_and_choices.append(choice)
        metrics["turns"] += 1
        calls = choice.message.tool_calls or []
        if not calls:
            end_reason = "truncated_reply" if choice.finish_reason == "length" else "no_tool_call"
            break
        ended = None
        for call in calls:
            metrics["tool_calls"] += 1
            parsed = _read_call(call)
            if isinstance(parsed, str):
                metrics["malformed_calls"] += 1
                text = f"Error: {parsed}"
            else:
                # an action, not call_tool(name, **arguments): the model may send an argument
                # called "name"
                result = await env.step(CallToolAction(tool_name=parsed[0], arguments=parsed[1]))
                text = result.observation.text
                if result.done:
                    ended = result
            trajectory.messages_and_choices.append(
                {"role": "tool", "tool_call_id": call.id, "content": text}
            )
            if ended is not None:
                break
        if ended is not None:
            trajectory.reward = float(ended.reward or 0.0)
            end_reason = (ended.observation.metadata or {}).get("end_reason") or "final_answer"
            break
    trajectory.metrics.update(metrics, solved=trajectory.reward >= 1.0)
    trajectory.metadata["end_reason"] = end_reason


def _read_call(call: Any) -> tuple[str, dict[str, Any]] | str:
    """A native tool call's name and arguments, or the error the model is answered with."""
    function = getattr(call, "function", None)
    name = getattr(function, "name", None)
    if not isinstance(name, str) or not name:
        return "a tool call must name a function"
    raw = getattr(function, "arguments", None) or "{}"
    try:
        arguments = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        return f"the arguments of {name} are not valid JSON: {exc}"
    if not isinstance(arguments, dict):
        return f"the arguments of {name} must be a JSON object"
    return name, arguments
