"""Drive whole episodes over the protocol with a fixed policy and collect rewards.

``oracle`` submits each task's known-good answer and ``null`` an empty one:
together they check that a served dataset is solvable (oracle 1.0) and that
its scorer cannot be gamed by saying nothing (null 0.0). The gold answers are
read locally from the same dataset; the server never reveals them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

from analyst_env.client.analyst_client import AnalystEnv
from analyst_env.datasets import Task
from analyst_env.datasets.task import ToolCall

POLICIES: dict[str, Callable[[Task], tuple[list[ToolCall], str]]] = {
    "oracle": lambda task: (task.oracle_steps, task.oracle_answer),
    "null": lambda task: ([], ""),
}
"""Each policy maps a task to (tool calls to make, answer to submit)."""


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
    answer: str,
    headers: dict[str, str] | None,
    steps: list[ToolCall] = (),
    *,
    record: FrameSink | None = None,
) -> dict[str, Any]:
    """Reset into ``task``, make the tool calls ``steps``, submit ``answer``; report the reward.

    Args:
        base_url: The server.
        task: The task to reset into (by id).
        answer: The ``final_answer`` text.
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
    async with _RecordingEnv(base_url=base_url, headers=headers, message_timeout_s=300, sink=sink) as env:

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
            return await ended({"task_id": task.id, "reward": 0.0, "error": first.observation.message})
        for i, step in enumerate(steps):
            env.label = f"step:{i}:{step.tool}"
            out = await env.call_tool(step.tool, **step.arguments)
            failed = out.observation.error is not None or (out.observation.result or {}).get("is_error")
            if failed or out.done:
                reason = out.observation.text
                return await ended(
                    {"task_id": task.id, "reward": 0.0, "error": f"step {step.tool} failed: {reason}"}
                )
        env.label = "final_answer"
        result = await env.final_answer(answer)
        if result.observation.error is not None:
            return await ended({"task_id": task.id, "reward": 0.0, "error": result.observation.error.message})
        row: dict[str, Any] = {"task_id": task.id, "reward": float(result.reward or 0.0)}
        metadata = result.observation.metadata or {}
        for key in ("reward_breakdown", "end_reason"):
            if key in metadata:
                row[key] = metadata[key]
        return await ended(row)


async def evaluate(
    base_url: str,
    tasks: Iterable[Task],
    policy: str,
    *,
    concurrency: int = 8,
    headers: dict[str, str] | None = None,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Run one episode per task with ``policy``; results in task order."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; choose from {sorted(POLICIES)}")
    choose = POLICIES[policy]
    gate = asyncio.Semaphore(concurrency)

    async def one(task: Task) -> dict[str, Any]:
        async with gate:
            try:
                steps, answer = choose(task)
                row = await run_episode(base_url, task, answer, headers, steps)
            except Exception as exc:  # a failed episode is a data point, not a crash
                row = {"task_id": task.id, "reward": 0.0, "error": f"{type(exc).__name__}: {exc}"}
        if on_result is not None:
            on_result(row)
        return row

    return list(await asyncio.gather(*(one(t) for t in tasks)))


def report(dataset: str, policy: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON report: dataset, policy, n, mean_reward and per-task rewards."""
    n = len(rows)
    return {
        "dataset": dataset,
        "policy": policy,
        "n": n,
        "mean_reward": sum(r["reward"] for r in rows) / n if n else 0.0,
        "errors": sum(1 for r in rows if "error" in r),
        "tasks": rows,
    }
