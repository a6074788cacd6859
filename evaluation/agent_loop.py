"""One evaluation episode: a policy's turns played as tool calls over the normal protocol.

The loop resets a fresh session into the task, shows the policy the task the
way the trainer adapters do (``prompts``), and then, turn after turn,
plays the tool calls of each reply on the server and answers them: as ``tool``
messages for native calls, as a ``<tool_response>`` user turn for the text
form. It ends when the server ends the episode (``final_answer`` or its step
limit), when a reply calls no tool (as SkyRL's generator does), at the turn
limit, or when the episode has spent its completion-token budget.

What the policy writes is never trusted: malformed calls are answered with an
error and the episode goes on, unknown tools are sent to the server (which
answers with its own error and counts the step), and the reward is only ever
the server's.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any, Protocol

from analyst_env.client.analyst_client import AnalystEnv
from analyst_env.datasets import Task
from analyst_env.evaluation.chat_client import ChatError, ChatReply
from analyst_env.models import CallToolAction
from analyst_env.prompts import task_prompt

# SOLVED_AT is defined with the report that counts by it; still importable from here.
from analyst_env.run_records.report import SOLVED_AT as SOLVED_AT
from analyst_env.trainers.tool_calls import parse_tool_calls, tool_responses_text

EXCERPT_CHARS = 400


class Policy(Protocol):
    name: str
    tool_format: str

    def system_prompt(self, specs: list[Any]) -> str: ...

    def tools(self, specs: list[Any]) -> list[dict[str, Any]] | None: ...

    async def reply(
        self, task: Task, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> ChatReply: ...


async def play_episode(
    base_url: str,
    task: Task,
    policy: Policy,
    *,
    headers: dict[str, str] | None = None,
    episode_id: str | None = None,
    seed: int | None = None,
    max_turns: int = 20,
    token_budget: int | None = None,
) -> dict[str, Any]:
    """Play one episode of ``task`` with ``policy``; the result row.

    Returns:
        ``task_id``, ``episode_id``, ``reward``, ``end_reason`` (the server's
        ``final_answer``/``step_limit``, or ``no_tool_call``, ``max_turns``,
        ``token_budget``, ``truncated_reply``, ``policy_error``, ``model_error``, ``env_error``,
        ``reset_failed``),
        ``turns``, ``tool_calls``, ``tools`` (calls per tool name),
        ``malformed_calls``, ``unknown_tool_calls``, ``tool_errors`` (calls the server
        answered with an error), ``prompt_tokens``,
        ``completion_tokens``, ``retries`` (of model requests), ``duration_s``, and
        ``error`` (what broke) plus ``transient`` (whether re-running could help)
        when something broke.
    """
    started = time.monotonic()
    row: dict[str, Any] = {
        "task_id": task.id,
        "episode_id": episode_id,
        "reward": 0.0,
        "end_reason": None,
        "turns": 0,
        "tool_calls": 0,
        "tools": {},
        "malformed_calls": 0,
        "unknown_tool_calls": 0,
        "tool_errors": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "retries": 0,
    }
    tools_used: Counter[str] = Counter()
    try:
        async with AnalystEnv(base_url=base_url, headers=headers, message_timeout_s=300) as env:
            await _play(env, task, policy, row, tools_used, seed, max_turns, token_budget)
    except ChatError as exc:
        row.update(
            end_reason="model_error", error=f"model endpoint: {exc}", transient=exc.transient
        )
    except Exception as exc:  # the server or the connection failed: a data point, not a crash
        row.update(
            end_reason=row["end_reason"] or "env_error",
            error=f"{type(exc).__name__}: {exc}",
            transient=True,
        )
    row["tools"] = dict(tools_used)
    row["tool_calls"] = sum(tools_used.values()) + row["malformed_calls"]
    row["duration_s"] = round(time.monotonic() - started, 3)
    return row


async def _play(
    env: AnalystEnv,
    task: Task,
    policy: Policy,
    row: dict[str, Any],
    tools_used: Counter[str],
    seed: int | None,
    max_turns: int,
    token_budget: int | None,
) -> None:
    options: dict[str, Any] = {"task_id": task.id}
    if row["episode_id"]:
        options["episode_id"] = row["episode_id"]
    if seed is not None:
        options["seed"] = seed
    first = await env.reset(**options)
    obs = first.observation
    row["episode_id"] = obs.episode_id
    if first.done:
        row.update(end_reason="reset_failed", error=obs.message or "the episode failed to start")
        return
    specs = [s.model_dump() for s in obs.available_tools]
    known = {s["name"] for s in specs}
    tools = policy.tools(specs)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": policy.system_prompt(specs)},
        {"role": "user", "content": task_prompt(obs.instruction, obs.files)},
    ]
    while True:
        if row["turns"] >= max_turns:
            row["end_reason"] = "max_turns"
            return
        if token_budget is not None and row["completion_tokens"] >= token_budget:
            row["end_reason"] = "token_budget"
            return
        reply = await policy.reply(task, messages, tools)
        row["turns"] += 1
        row["prompt_tokens"] += reply.prompt_tokens
        row["completion_tokens"] += reply.completion_tokens
        row["retries"] += reply.attempts - 1
        messages.append(reply.message())
        if reply.error is not None:
            row.update(end_reason="policy_error", error=reply.error)
            return
        native = bool(reply.tool_calls)
        calls = _native_calls(reply.tool_calls) if native else parse_tool_calls(reply.content)
        if not calls:
            truncated = reply.finish_reason == "length"
            row["end_reason"] = "truncated_reply" if truncated else "no_tool_call"
            row["last_reply"] = reply.content[:EXCERPT_CHARS]
            return
        responses: list[str] = []
        for call in calls:
            if isinstance(call, str):
                row["malformed_calls"] += 1
                responses.append(f"Error: {call}")
                continue
            name, arguments = call["name"], call["arguments"]
            tools_used[name] += 1
            if name not in known:
                row["unknown_tool_calls"] += 1
            result = await env.step(CallToolAction(tool_name=name, arguments=arguments))
            responses.append(result.observation.text)
            outcome = result.observation.result
            failed = isinstance(outcome, dict) and bool(outcome.get("is_error"))
            row["tool_errors"] += failed or result.observation.error is not None
            if result.done:
                _ended(row, result)
                return
        if native:
            for raw, text in zip(reply.tool_calls, responses):
                messages.append(
                    {"role": "tool", "tool_call_id": str(raw.get("id") or ""), "content": text}
                )
        else:
            messages.append({"role": "user", "content": tool_responses_text(responses)})


def _ended(row: dict[str, Any], result: Any) -> None:
    """Copy the server's verdict on the episode into ``row``."""
    metadata = result.observation.metadata or {}
    row["reward"] = float(result.reward or 0.0)
    row["end_reason"] = metadata.get("end_reason") or "final_answer"
    if "reward_breakdown" in metadata:
        row["reward_breakdown"] = metadata["reward_breakdown"]
    if result.observation.error is not None:
        row["error"] = result.observation.error.message


def _native_calls(raw_calls: list[dict[str, Any]]) -> list[dict[str, Any] | str]:
    """Native ``tool_calls`` as ``{"name", "arguments"}`` dicts, or an error string per bad one."""
    calls: list[dict[str, Any] | str] = []
    for raw in raw_calls:
        function = raw.get("function")
        if not isinstance(function, dict):
            function = {}
        name = function.get("name")
        if not isinstance(name, str) or not name:
            calls.append("a tool call must name a function")
            continue
        arguments = function.get("arguments") or {}
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                calls.append(f"the arguments of {name} are not valid JSON: {exc}")
                continue
        if not isinstance(arguments, dict):
            calls.append(f"the arguments of {name} must be a JSON object")
            continue
        calls.append({"name": name, "arguments": arguments})
    return calls
