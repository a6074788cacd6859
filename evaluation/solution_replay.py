"""Worked solutions of procedural tasks, replayed against a live server and kept as SFT data.

A solution (``datasets/procedural/solutions``) is the tool calls an analyst
makes; it only becomes training data once the real server ran them in a real
sandbox and scored the answer 1.0. :func:`replay` plays one through
:func:`analyst_env.evaluation.engine.run_episode`: the final answer is the last
line the last cell printed *in the sandbox* (never the gold), and every frame
is recorded. The frames are turned into the records the server's trajectory
store writes (reset, steps, end), so :func:`analyst_env.trainers.trajectory_export.to_sft`
makes the chat record, in the message and tool-call format the trainer
adapters and ``export trajectories --format sft`` use. :func:`replay_many`
plays a range of tasks a few at a time and says which were kept and which
dropped, and why.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from analyst_env.datasets import Task
from analyst_env.datasets.procedural import solutions
from analyst_env.datasets.procedural.solution_files import solution_for
from analyst_env.evaluation.engine import each_bounded, run_episode
from analyst_env.task_format import ToolCall
from analyst_env.trainers.trajectory_export import to_sft

Row = dict[str, Any]


def _records(task: Task, frames: list[tuple[str, dict]], steps: list[ToolCall], row: Row) -> list:
    """The trajectory-store records (reset, one step per tool call, end) of a recorded replay."""
    by_label = dict(frames)
    obs = by_label["reset"].get("observation", {})
    records: list[dict[str, Any]] = [
        {
            "type": "reset",
            "task_id": task.id,
            "episode_id": obs.get("episode_id", ""),
            "observation": obs,
        }
    ]
    calls = [(f"step:{i}:{s.tool}", s.tool, s.arguments) for i, s in enumerate(steps)]
    calls.append(("final_answer", "final_answer", {"answer": row.get("answer", "")}))
    for index, (label, tool, arguments) in enumerate(calls):
        if label in by_label:
            records.append(
                {
                    "type": "step",
                    "index": index,
                    "action": {"tool_name": tool, "arguments": arguments},
                    "observation": by_label[label].get("observation", {}),
                }
            )
    records.append({"type": "end", "reward": row["reward"], "end_reason": row.get("end_reason")})
    return records


Solver = Callable[[Task, str | None], tuple[str, list[ToolCall]]]
"""Where a task's solution comes from: its plan (``solution_for``), or a frozen set's file
(``FrozenSolutions.solution_for``)."""


async def replay(
    base_url: str,
    task: Task,
    headers: dict[str, str] | None = None,
    style: str | None = None,
    solve: Solver = solution_for,
) -> Row:
    """Replay ``task``'s solution on the server; the row has ``reward``, ``style``, ``turns``,
    ``level`` and, at reward 1.0, the SFT ``record`` (``error`` says why a replay failed)."""
    row: Row = {"task_id": task.id, "level": task.metadata.get("level"), "reward": 0.0}
    try:
        row["style"], steps = solve(task, style)
    except solutions.NoSolution as exc:
        return {**row, "uncovered": task.metadata.get("category", "?"), "error": str(exc)}
    frames: list[tuple[str, dict]] = []

    def answer_of(shown: str) -> str:
        row["answer"] = solutions.answer_from(shown)
        return row["answer"]

    try:
        result = await run_episode(
            base_url,
            task,
            answer_of,
            headers,
            steps,
            record=lambda label, data: frames.append((label, data)),
        )
    except Exception as exc:  # a broken replay is a dropped trajectory, not a crash
        return {**row, "error": f"{type(exc).__name__}: {exc}"}
    row.update(result, turns=len(steps) + 1)
    if row["reward"] == 1.0:
        row["record"] = {**to_sft(_records(task, frames, steps, row)), "style": row["style"]}
    return row


async def replay_many(
    base_url: str,
    tasks: Iterable[Task],
    *,
    headers: dict[str, str] | None = None,
    style: str | None = None,
    concurrency: int = 4,
    on_result: Callable[[Row], None] | None = None,
    solve: Solver = solution_for,
) -> list[Row]:
    """Replay every task's solution, ``concurrency`` at a time; rows in task order."""
    return await each_bounded(
        tasks, lambda task: replay(base_url, task, headers, style, solve), concurrency, on_result
    )


def summary(rows: list[Row], seconds: float) -> dict[str, Any]:
    """Kept, dropped (failed replays, with why) and uncovered (by category), trajectories per
    second and mean turns per kept trajectory by level."""
    kept = [r for r in rows if "record" in r]
    uncovered: dict[str, int] = {}
    for r in rows:
        if "uncovered" in r:
            uncovered[r["uncovered"]] = uncovered.get(r["uncovered"], 0) + 1
    dropped = [
        {"task_id": r["task_id"], "reward": r["reward"], "error": r.get("error", "")}
        for r in rows
        if "record" not in r and "uncovered" not in r
    ]
    turns: dict[str, list[int]] = {}
    for r in kept:
        turns.setdefault(str(r["level"]), []).append(r["turns"])
    replayed = len(kept) + len(dropped)
    return {
        "tasks": len(rows),
        "replayed": replayed,
        "kept": len(kept),
        "dropped": dropped,
        "pass_rate": round(len(kept) / replayed, 4) if replayed else 0.0,
        "uncovered_by_category": dict(sorted(uncovered.items())),
        "trajectories_per_s": round(replayed / seconds, 2) if seconds > 0 else 0.0,
        "turns_by_level": {k: round(sum(v) / len(v), 2) for k, v in sorted(turns.items())},
        "seconds": round(seconds, 1),
    }


def timed(run: Callable[[], list[Row]]) -> tuple[list[Row], float]:
    """``run()``'s rows and the seconds it took."""
    started = time.perf_counter()
    rows = run()
    return rows, time.perf_counter() - started


__all__ = ["Solver", "replay", "replay_many", "solution_for", "summary", "timed"]
