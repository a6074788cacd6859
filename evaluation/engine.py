"""Drive whole episodes over the protocol and collect rewards: ``analyst-env eval``'s engine.

:func:`evaluate` plays every task ``samples`` times with one policy (a model
behind a chat endpoint, or the scripted ``oracle``/``null``) through the agent
loop, a bounded number at a time, appending each row to the run's log as it
finishes. :func:`run_episode` is the frame-recording runner ``validate`` uses
to scan every frame of an oracle or null episode for leaked gold values. The
gold answers are read locally from the same dataset; the server never reveals
them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from analyst_env.client.analyst_client import AnalystEnv
from analyst_env.datasets import Task
from analyst_env.evaluation.agent_loop import Policy, play_episode
from analyst_env.evaluation.policies import ScriptedPolicy
from analyst_env.run_records.report import task_facets
from analyst_env.run_records.run_log import RunLog, episode_id_for
from analyst_env.task_format import ToolCall

FrameSink = Callable[[str, dict[str, Any]], None]
"""Receives each frame's data as it arrives: ``(label, data)``; see :func:`run_episode`."""


class _RecordingEnv(AnalystEnv):
    """``AnalystEnv`` that hands the raw data of every frame it parses to a sink."""

    def __init__(self, *args: Any, sink: FrameSink, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._sink = sink
        self.label = "reset"

    def _parse_result(self, payload: dict[str, Any]):
        self._sink(self.label, payload)
        return super()._parse_result(payload)

    def _parse_state(self, payload: dict[str, Any]):
        self._sink(self.label, payload)
        return super()._parse_state(payload)


async def run_episode(
    base_url: str,
    task: Task,
    answer: str | Callable[[str], str],
    headers: dict[str, str] | None,
    steps: Sequence[ToolCall] = (),
    *,
    record: FrameSink | None = None,
) -> dict[str, Any]:
    """Reset into ``task``, make the tool calls ``steps``, submit ``answer``; report the reward.

    Args:
        base_url: The server.
        task: The task to reset into (by id).
        answer: The ``final_answer`` text, or a function of what the last step showed (the
            text the model would read) giving it: a worked solution's answer is what its last
            cell printed in the sandbox, not a gold copied in.
        headers: Extra HTTP headers (a bearer token).
        steps: Tool calls made before the answer; the first that fails ends the run.
        record: If given, receives the data of every frame, labelled ``"reset"``,
            ``"state:reset"`` (the state right after reset), ``"step:<i>:<tool>"``,
            ``"final_answer"`` and ``"state:final"`` (the state at the end). The
            two state frames are only fetched when recording.

    Returns:
        ``{"task_id", "reward"}``, plus ``"error"`` if the run went wrong and
        ``"reward_breakdown"`` / ``"end_reason"`` when the final observation has them.
    """
    sink = record or (lambda _label, _data: None)
    async with _RecordingEnv(
        base_url=base_url, headers=headers, message_timeout_s=300, sink=sink
    ) as env:

        async def ended(row: dict[str, Any]) -> dict[str, Any]:
            if record is not None:
                env.label = "state:final"
                await env.state()
            return row

        first = await env.reset(task_id=task.id)
        if record is not None:
            env.label = "state:reset"
            await env.state()
        if first.done:
            return await ended(
                {"task_id": task.id, "reward": 0.0, "error": first.observation.message}
            )
        shown = ""
        for i, step in enumerate(steps):
            env.label = f"step:{i}:{step.tool}"
            out = await env.call_tool(step.tool, **step.arguments)
            shown = out.observation.text
            failed = out.observation.error is not None or (out.observation.result or {}).get(
                "is_error"
            )
            if failed or out.done:
                reason = out.observation.text
                return await ended(
                    {
                        "task_id": task.id,
                        "reward": 0.0,
                        "error": f"step {step.tool} failed: {reason}",
                    }
                )
        env.label = "final_answer"
        result = await env.final_answer(answer if isinstance(answer, str) else answer(shown))
        if result.observation.error is not None:
            return await ended(
                {"task_id": task.id, "reward": 0.0, "error": result.observation.error.message}
            )
        row: dict[str, Any] = {"task_id": task.id, "reward": float(result.reward or 0.0)}
        metadata = result.observation.metadata or {}
        for key in ("reward_breakdown", "end_reason"):
            if key in metadata:
                row[key] = metadata[key]
        return await ended(row)


async def each_bounded(
    items: Iterable[Any],
    run: Callable[[Any], Awaitable[dict[str, Any]]],
    concurrency: int,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """``await run(item)`` for every item, ``concurrency`` at a time; the rows in item order,
    each handed to ``on_result`` as it finishes (a progress bar)."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    gate = asyncio.Semaphore(concurrency)

    async def one(item: Any) -> dict[str, Any]:
        async with gate:
            row = await run(item)
        if on_result is not None:
            on_result(row)
        return row

    return list(await asyncio.gather(*(one(item) for item in items)))


async def evaluate(
    base_url: str,
    tasks: Iterable[Task],
    policy: str | Policy,
    *,
    concurrency: int = 8,
    headers: dict[str, str] | None = None,
    on_result: Callable[[dict[str, Any]], None] | None = None,
    samples: int = 1,
    max_turns: int = 20,
    token_budget: int | None = None,
    seed: int | None = None,
    log: RunLog | None = None,
    run_id: str | None = None,
) -> list[dict[str, Any]]:
    """Play ``samples`` episodes per task with ``policy`` in the agent loop; rows in task order.

    Args:
        base_url: The environment server.
        tasks: The tasks (read locally: the scripted policies need their gold).
        policy: ``"oracle"``, ``"null"`` or a :class:`.agent_loop.Policy`.
        concurrency: Episodes in flight.
        on_result: Called with each row as its episode finishes (a progress bar).
        samples: Episodes per task (sample ``k`` of a task is row ``sample=k``).
        log: The run's log: finished episodes in it are not played again, and
            every new row is appended to it as soon as it exists.
        run_id: Names the episodes (``episode_id_for``) so the trajectory store's
            recordings can be found from the run.
    """
    if isinstance(policy, str):
        policy = ScriptedPolicy(policy)
    if samples < 1 or concurrency < 1:
        raise ValueError("samples and concurrency must be at least 1")
    tasks = list(tasks)
    done = log.finished() if log is not None else {}
    gate = asyncio.Semaphore(concurrency)

    async def one(task: Task, sample: int) -> dict[str, Any]:
        if (task.id, sample) in done:
            return done[task.id, sample]
        async with gate:
            episode_id = episode_id_for(run_id, task.id, sample) if run_id else None
            row = await play_episode(
                base_url,
                task,
                policy,
                headers=headers,
                episode_id=episode_id,
                seed=seed,
                max_turns=max_turns,
                token_budget=token_budget,
            )
        row = {"sample": sample, **task_facets(task), **row}
        if log is not None:
            log.append(row)
        if on_result is not None:
            on_result(row)
        return row

    jobs = [one(task, k) for task in tasks for k in range(samples)]
    return list(await asyncio.gather(*jobs))
