"""The numbers of an evaluation run: pass@k, mean reward, summaries by facet, failure reasons.

Everything here is computed from the episode rows alone (the run's JSONL log),
so the CLI's report, the HTML report and the server's Runs page agree, and a
report can be rebuilt from the log of a run that was interrupted.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from math import comb
from typing import Any

SOLVED_AT = 1.0
"""A sample counts as solved (for pass@k and accuracy) when its reward reaches this."""

FACETS = ("dataset", "kind", "level", "category")
_LEVEL_KEYS = ("level", "difficulty", "hardness")
_CATEGORY_KEYS = ("category", "type", "qtype", "template", "concepts")


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k of a task with ``n`` samples of which ``c`` passed (Chen et al., 2021).

    The chance that at least one of ``k`` samples drawn without replacement from
    the ``n`` passes: ``1 - C(n - c, k) / C(n, k)``.

    >>> pass_at_k(4, 1, 1), pass_at_k(4, 1, 4), pass_at_k(4, 0, 2)
    (0.25, 1.0, 0.0)
    >>> round(pass_at_k(5, 2, 2), 4)
    0.7
    """
    if not 1 <= k <= n:
        raise ValueError(f"pass@{k} needs 1 <= k <= n samples, and n is {n}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def report_ks(samples: int) -> list[int]:
    """The k of pass@k a run of ``samples`` per task reports: 1, 2, 4, ... and ``samples``.

    >>> report_ks(1), report_ks(5), report_ks(8)
    ([1], [1, 2, 4, 5], [1, 2, 4, 8])
    """
    ks, k = [], 1
    while k < samples:
        ks.append(k)
        k *= 2
    return [*ks, samples]


def task_facets(task: Any) -> dict[str, str | None]:
    """A task's dataset, file kind, level and category, whatever its loader calls them.

    The dataset is ``metadata.source`` (else the id's first part); the level is
    ``level``/``difficulty``/``hardness``; the category is ``category``, else the
    loader's own grouping (``type``, ``qtype``, the starter ``template``, DABench's
    first ``concepts`` entry).
    """
    meta = task.metadata or {}

    def first(keys: tuple[str, ...]) -> str | None:
        for key in keys:
            value = meta.get(key)
            if isinstance(value, list):
                value = value[0] if value else None
            if value not in (None, ""):
                return str(value)
        return None

    return {
        "dataset": str(meta.get("dataset") or meta.get("source") or task.id.split("-", 1)[0]),
        "kind": first(("kind",)),
        "level": first(_LEVEL_KEYS),
        "category": first(_CATEGORY_KEYS),
    }


def failure_reason(row: dict[str, Any]) -> str | None:
    """Why an episode did not solve its task (None when it did)."""
    if row.get("reward", 0.0) >= SOLVED_AT:
        return None
    if row.get("end_reason") in (None, "final_answer", "answered"):
        return "wrong_answer" if not row.get("error") else "answer_error"
    return str(row["end_reason"])


def _stats(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    return {
        "episodes": n,
        "tasks": len({r["task_id"] for r in rows}),
        "mean_reward": sum(r["reward"] for r in rows) / n if n else 0.0,
        "accuracy": sum(r["reward"] >= SOLVED_AT for r in rows) / n if n else 0.0,
    }


def build_report(run: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON report of a run from its header (``run``) and episode rows.

    Keeps the fields of the first ``eval`` reports (``dataset``, ``policy``,
    ``n`` tasks, ``mean_reward``, ``errors``, per-task ``tasks`` rows with
    ``task_id`` and ``reward``) and adds the model, the sampling settings,
    pass@k, token counts, summaries by facet, failure reasons and every episode.
    """
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_task[row["task_id"]].append(row)
    samples = int(run.get("samples") or 1)
    ks = report_ks(samples)
    task_rows = []
    for task_id, group in by_task.items():
        group.sort(key=lambda r: r.get("sample", 0))
        rewards = [r["reward"] for r in group]
        solved = sum(x >= SOLVED_AT for x in rewards)
        entry: dict[str, Any] = {
            "task_id": task_id,
            "reward": sum(rewards) / len(rewards),
            "rewards": rewards,
            "samples": len(group),
            "solved": solved,
            "pass_at_k": {str(k): pass_at_k(len(group), solved, k) for k in ks if k <= len(group)},
            **{f: group[0].get(f) for f in FACETS},
            "turns": sum(r.get("turns", 0) for r in group) / len(group),
            "failures": sorted({x for x in map(failure_reason, group) if x}),
        }
        errors = [r["error"] for r in group if r.get("error")]
        if errors:
            entry["error"] = errors[0]
        task_rows.append(entry)
    n = len(task_rows)
    pass_k = {}
    for k in ks:
        eligible = [t["pass_at_k"][str(k)] for t in task_rows if str(k) in t["pass_at_k"]]
        if eligible:
            pass_k[str(k)] = sum(eligible) / len(eligible)
    prompt = sum(r.get("prompt_tokens", 0) for r in rows)
    completion = sum(r.get("completion_tokens", 0) for r in rows)
    summary = {}
    for facet in FACETS:
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in rows:
            groups[str(row.get(facet) or "–")].append(row)
        summary[facet] = {value: _stats(group) for value, group in sorted(groups.items())}
    config = run.get("config") or {}
    model = run.get("model")
    if model is None and config.get("model"):
        model = {
            "name": config["model"],
            "url": config.get("model_url"),
            "tool_format": config.get("tool_format"),
        }
    complete = n * samples == len(rows) and n >= int(run.get("tasks_planned") or n)
    return {
        "run_id": run.get("run_id"),
        "dataset": run.get("dataset"),
        "policy": run.get("policy"),
        "model": model,
        "sampling": run.get("sampling") or {},
        "settings": {k: run.get(k) for k in ("split", "limit", "max_turns", "token_budget")},
        "samples": samples,
        "n": n,
        "episodes": len(rows),
        "complete": complete,
        "mean_reward": sum(t["reward"] for t in task_rows) / n if n else 0.0,
        "accuracy": _stats(rows)["accuracy"],
        "pass_at_k": pass_k,
        "errors": sum(1 for r in rows if r.get("error")),
        "tokens": {
            "prompt": prompt,
            "completion": completion,
            "total": prompt + completion,
            "completion_per_episode": completion / len(rows) if rows else 0.0,
        },
        "failures": dict(Counter(x for x in map(failure_reason, rows) if x).most_common()),
        "summary": summary,
        "started_at": run.get("started_at"),
        "tasks": task_rows,
        "episode_rows": rows,
    }
