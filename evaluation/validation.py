"""Check that every task of a dataset is sound, over the protocol: ``analyst-env validate``.

A dataset is sound when, for each task, through the real server:

- **oracle**: replaying ``task.oracle_steps`` and submitting ``task.oracle_answer``
  scores exactly 1.0 (the task is solvable and its gold agrees with its scorer);
- **null**: the null run scores exactly 0.0 (saying nothing earns nothing);
- **repeat**: the oracle run a second time scores the same as the first (the
  verifier is deterministic);
- **leak**: no gold value reaches the agent before it answers (which values count
  as gold, how they are matched and which frames are scanned is
  :mod:`analyst_env.evaluation.gold_leaks`);
- **adversarial**: every answer :mod:`analyst_env.verifiers.adversarial` builds
  from the task's gold to game its scorer (empty, "all of them", hedges that
  name the gold among other candidates, supersets, NaN, files the scorer must
  refuse...) scores exactly 0, offline, under the ``strict`` profile;
- **natural**: every natural correct form that module builds for the scorer
  (thousand separators, prose around the number, another order where order
  does not matter...) scores exactly 1;
- **solution**: a procedural task's worked solution (``datasets/procedural/solutions``),
  replayed on the server, scores exactly 1.0 with the answer its last cell printed
  in the sandbox (:mod:`analyst_env.evaluation.solution_replay`, what ``export sft``
  keeps); a frozen ``tasks:DIR`` set's solution is its line of ``solutions.jsonl``.
  Tasks without one (not procedural, a frozen set without the file, or a template
  with no solution yet) are counted, not failed.

The report counts, per scorer, the adversarial answers tried and the natural
forms tried, and how many scored as they must.

Episodes run with :func:`analyst_env.evaluation.engine.run_episode`, which
hands every frame to the leak scan; a task's three runs go one after another
(oracle, null, repeat), tasks run concurrently.

**The null run** is: reset, ``list_files``, ``final_answer("")``. The
``list_files`` step makes anything a setup hook put in the working directory
visible, so a gold value written into a file *name* (or any other sign of it
that reaches the agent before it answers) is caught.

**Quarantine.** Validation reads the one decision every other user reads
(:func:`analyst_env.datasets.quarantine.quarantine_reason`: the loaders' gold
checks and, at load, whether the untouched initial state solves the task).
Quarantined tasks are still run and reported, under ``broken_upstream`` with
that evidence, and do not fail the validation; they are never dropped. Its own
null run is a cross-check of that decision: an upstream task (one whose loader
records a ``gold_status``) that is served although its null run scores above 0
fails the ``quarantine`` check (the load-time decision missed it, a bug); one
scored by verify hooks, which only an episode can run, is listed under
``broken_upstream`` with ``"solved by its initial state: ..."``. Both kinds are
named in ``served_but_quarantinable``: served, yet quarantinable. A task of our own
with that fault fails the ``null`` check: it is ours to fix. ``quarantine`` in
the report counts quarantined tasks by reason.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

from analyst_env.datasets import Task
from analyst_env.datasets.quarantine import (
    SOLVED_BY_INITIAL_STATE,
    initial_state_checkable,
    quarantine_reason,
)
from analyst_env.evaluation.engine import each_bounded, run_episode
from analyst_env.evaluation.gold_leaks import Frames, scan_runs
from analyst_env.evaluation.solution_replay import Solver, solution_for
from analyst_env.evaluation.solution_replay import replay as replay_solution
from analyst_env.task_format import ToolCall
from analyst_env.verifiers.adversarial import ProbeResult, probe_task, summarize

CHECKS = ("oracle", "null", "repeat", "leak", "adversarial", "natural", "solution", "quarantine")
"""Names of the checks, as the report names a failing one."""

NULL_STEPS = [ToolCall(tool="list_files")]
"""The null run's tool calls before it submits the empty answer."""

Row = dict[str, Any]


# ── one task ──
def _reward_failures(runs: dict[str, Row]) -> list[dict[str, str]]:
    """The oracle, null and repeat checks on the three runs' results."""

    def said(name: str) -> str:
        error = runs[name].get("error")
        return f"{runs[name].get('reward')}" + (f" ({error})" if error else "")

    oracle, null, repeat = (runs[name].get("reward") for name in ("oracle", "null", "repeat"))
    failures = []
    if oracle != 1.0:
        failures.append({"check": "oracle", "reason": f"oracle scored {said('oracle')}, not 1.0"})
    if null != 0.0:
        failures.append({"check": "null", "reason": f"null answer scored {said('null')}, not 0.0"})
    if repeat is None or repeat != oracle:
        failures.append(
            {"check": "repeat", "reason": f"oracle scored {oracle}, then {said('repeat')}"}
        )
    return failures


def _probe_failures(probes: ProbeResult) -> list[dict[str, str]]:
    """The adversarial and natural checks on what probing the scorer found."""
    failures = []
    if probes.adversarial_nonzero:
        failures.append(
            {
                "check": "adversarial",
                "reason": (
                    f"{len(probes.adversarial_nonzero)} of {probes.adversarial_tried} "
                    "adversarial answers "
                    f"scored above 0: {', '.join(probes.adversarial_nonzero)}"
                ),
            }
        )
    if probes.natural_failed:
        failures.append(
            {
                "check": "natural",
                "reason": (
                    f"{len(probes.natural_failed)} of {probes.natural_tried} natural correct forms "
                    f"scored below 1: {', '.join(probes.natural_failed)}"
                ),
            }
        )
    return failures


async def validate_task(
    base_url: str,
    task: Task,
    headers: dict[str, str] | None = None,
    solve: Solver = solution_for,
) -> Row:
    """Run the oracle, null and repeat runs of ``task`` and apply the four checks.

    Returns:
        The task's row: ``task_id``, the three rewards, ``leak`` (None or where),
        ``gold_values_checked``, ``status`` (``pass``, ``fail`` or
        ``broken_upstream``), ``failures`` (``[{"check", "reason", "reward_breakdown"}]``),
        and for a task with failures the ``reward_breakdown`` of each run.
    """
    plans = {
        "oracle": (task.oracle_steps, task.oracle_answer),
        "null": (NULL_STEPS, ""),
        "repeat": (task.oracle_steps, task.oracle_answer),
    }
    frames: dict[str, Frames] = {name: [] for name in plans}
    runs: dict[str, Row] = {}
    for name, (steps, answer) in plans.items():

        def sink(label: str, data: dict[str, Any], into: Frames = frames[name]) -> None:
            into.append((label, data))

        try:
            runs[name] = await run_episode(
                base_url, task, answer, headers, list(steps), record=sink
            )
        except Exception as exc:  # a broken run is a finding, not a crash
            runs[name] = {
                "task_id": task.id,
                "reward": None,
                "error": f"{type(exc).__name__}: {exc}",
            }

    failures: list[dict[str, Any]] = _reward_failures(runs)
    solution = await replay_solution(base_url, task, headers, solve=solve)
    if "uncovered" not in solution and solution["reward"] != 1.0:
        said = f" ({solution['error']})" if solution.get("error") else ""
        failures.append(
            {
                "check": "solution",
                "reason": f"the worked solution ({solution.get('style')}) scored "
                f"{solution['reward']}, not 1.0{said}",
            }
        )
    leak, checked = scan_runs(task, frames)
    if leak is not None:
        failures.append({"check": "leak", "reason": leak})
    probes = await asyncio.to_thread(probe_task, task)
    failures += _probe_failures(probes)
    row: Row = {
        "task_id": task.id,
        **{name: runs[name].get("reward") for name in plans},
        "solution": None if "uncovered" in solution else solution["reward"],
        "leak": leak,
        "gold_values_checked": checked,
        "probes": dataclasses.asdict(probes),
        "failures": failures,
    }
    if failures:
        row["reward_breakdown"] = {name: runs[name].get("reward_breakdown") for name in plans}
        for failure in failures:
            run = failure["check"] if failure["check"] in plans else "null"
            failure["reward_breakdown"] = (
                solution.get("reward_breakdown")
                if failure["check"] == "solution"
                else runs[run].get("reward_breakdown")
            )
    reason = quarantine_reason(task)  # the decision serving, eval and exports read
    if reason is not None:
        row["status"] = "broken_upstream"
        row["gold_status"] = reason
        return row
    null_reward = runs["null"].get("reward")
    if "gold_status" in task.metadata and null_reward is not None and null_reward > 0:
        found = f"{SOLVED_BY_INITIAL_STATE}: the null run scored {_cell(null_reward)}"
        if not initial_state_checkable(task):  # verify hooks: only this run can tell
            row.update(status="broken_upstream", gold_status=found, served=True)
            return row
        # served and drawn, yet its own null run says "solved by its initial state": the
        # load-time decision missed it, which is a bug to fix there, so the run fails
        failures.append(
            {
                "check": "quarantine",
                "reason": (
                    f"served, but the null run scored {_cell(null_reward)}: "
                    f"{SOLVED_BY_INITIAL_STATE}, which the load-time quarantine "
                    "(datasets/quarantine.py) did not find"
                ),
                "reward_breakdown": runs["null"].get("reward_breakdown"),
            }
        )
    row["status"] = "fail" if failures else "pass"
    return row


# ── a whole dataset ──
async def validate(
    base_url: str,
    tasks: Iterable[Task],
    *,
    concurrency: int = 8,
    headers: dict[str, str] | None = None,
    on_result: Callable[[Row], None] | None = None,
    solve: Solver = solution_for,
) -> list[Row]:
    """Validate every task, ``concurrency`` tasks at a time; rows in task order. ``solve``
    gives each task's worked solution (a frozen set's: ``FrozenSolutions.solution_for``)."""
    return await each_bounded(
        tasks, lambda task: validate_task(base_url, task, headers, solve), concurrency, on_result
    )


def report(dataset: str, rows: list[Row]) -> dict[str, Any]:
    """The JSON report: ``dataset``, ``n``, ``passed``, ``failed``, ``broken_upstream``,
    ``scorers`` (per scorer: tasks, adversarial answers tried and scored 0, natural
    forms tried and scored 1) and ``tasks``."""
    failed = [
        {"task_id": r["task_id"], **failure}
        for r in rows
        if r["status"] == "fail"
        for failure in r["failures"]
    ]
    broken = [
        {"task_id": r["task_id"], "gold_status": r["gold_status"], "failures": r["failures"]}
        for r in rows
        if r["status"] == "broken_upstream"
    ]
    return {
        "dataset": dataset,
        "n": len(rows),
        "passed": sum(r["status"] == "pass" for r in rows),
        "failed": failed,
        "broken_upstream": broken,
        "quarantine": quarantine_counts(broken),
        "served_but_quarantinable": sorted(
            {r["task_id"] for r in rows for f in r["failures"] if f["check"] == "quarantine"}
            | {r["task_id"] for r in rows if r.get("served")}
        ),
        "scorers": summarize(ProbeResult(**r["probes"]) for r in rows if "probes" in r),
        "solutions": {
            "replayed": sum(r.get("solution") is not None for r in rows),
            "scored_1": sum(r.get("solution") == 1.0 for r in rows),
            "without_solution": sum(r.get("solution") is None for r in rows),
        },
        "tasks": rows,
    }


def quarantine_counts(broken: list[Row]) -> dict[str, int]:
    """Quarantined tasks by reason (the evidence up to its first colon)."""
    counts: dict[str, int] = {}
    for row in broken:
        reason = str(row["gold_status"]).split(":")[0]
        counts[reason] = counts.get(reason, 0) + 1
    return dict(sorted(counts.items()))


def _cell(reward: float | None) -> str:
    return "error" if reward is None else f"{reward:g}"


def format_table(rows: list[Row]) -> str:
    """One line per task: oracle, null, repeat, leak, status."""
    width = max([len("task_id"), *(len(r["task_id"]) for r in rows)])
    lines = [
        f"{'task_id':<{width}}  {'oracle':>6}  {'null':>6}  {'repeat':>6}  {'leak':<4}  status"
    ]
    for r in rows:
        leak = "LEAK" if r["leak"] else ("ok" if r["gold_values_checked"] else "n/a")
        status = r["status"]
        if r["failures"]:
            status += " (" + ", ".join(f["check"] for f in r["failures"]) + ")"
        lines.append(
            f"{r['task_id']:<{width}}  {_cell(r['oracle']):>6}  {_cell(r['null']):>6}  "
            f"{_cell(r['repeat']):>6}  {leak:<4}  {status}"
        )
    return "\n".join(lines)


def summary(result: dict[str, Any]) -> str:
    """One line: counts of passed, failed and broken-upstream tasks."""
    failed_tasks = len({f["task_id"] for f in result["failed"]})
    line = (
        f"validate {result['dataset']}: n={result['n']} passed={result['passed']} "
        f"failed={failed_tasks} broken_upstream={len(result['broken_upstream'])} "
        f"served_but_quarantinable={len(result.get('served_but_quarantinable', []))}"
    )
    solved = result.get("solutions") or {}
    if solved.get("replayed"):
        line += f" solutions={solved['scored_1']}/{solved['replayed']}"
    if result.get("quarantine"):
        line += (
            " (quarantined: " + ", ".join(f"{k} {v}" for k, v in result["quarantine"].items()) + ")"
        )
    return line


def format_probes(result: dict[str, Any]) -> str:
    """Per scorer, one line: adversarial answers tried and how many scored 0, natural forms too."""
    lines = ["scorer probes (strict profile):"]
    for name, row in result["scorers"].items():
        tried, zero = row["adversarial_tried"], row["adversarial_scored_0"]
        line = f"  {name}: {row['tasks']} task(s), {tried} adversarial answers tried, "
        line += "every one scored 0" if tried == zero else f"{tried - zero} scored above 0"
        if row["natural_tried"]:
            ok = row["natural_scored_1"]
            line += f"; {row['natural_tried']} natural correct forms, "
            line += (
                "every one scored 1"
                if ok == row["natural_tried"]
                else f"{row['natural_tried'] - ok} below 1"
            )
        if row["note"]:
            line += f" ({row['note']})"
        for why, count in row["not_probed"].items():
            line += f"; {count} not probed ({why})"
        lines.append(line)
    return "\n".join(lines)
