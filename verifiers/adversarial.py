"""Answers a policy might try instead of solving a task, and correct answers in natural forms.

A policy under training tries every answer that might earn reward without the
work: saying nothing, "all of them", hedges that name the gold among other
candidates, supersets, NaN, a copy of the input. Such answers are built *from
each task's own gold* (:mod:`~analyst_env.verifiers.probe_answers`,
:mod:`~analyst_env.verifiers.task_probes`), so they are aimed at the real scorer
on the real task, together with the natural correct forms the scorer documents
(thousand separators, prose around the number, another order where order does
not matter...). This module scores them and sums up what it found.
``analyst-env validate`` probes every task with them and the reward-hacking
tests use the same generators: one list, two users.

Every probe is cheap: a short text (no multi-kilobyte shapes; those are the
cost-bound tests' job), and for file-scored tasks only files a scorer refuses
before opening them with LibreOffice. Scoring runs in-process with
:func:`~analyst_env.verifiers.scorers.judge`.

Example:
    >>> from analyst_env.task_format import Task, VerifierSpec
    >>> task = Task(id="t", instruction="Total?", answer=42.5, oracle_answer="42.5",
    ...             verifier=VerifierSpec(name="numeric"))
    >>> result = probe_task(task)
    >>> result.adversarial_tried > 10 and result.adversarial_nonzero == []
    True
    >>> result.natural_failed
    []
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from analyst_env.task_format import Task
from analyst_env.verifiers.probe_answers import JUNK, Probe, is_nan_text, numeric_probes
from analyst_env.verifiers.scorers import judge
from analyst_env.verifiers.task_probes import probes_for
from analyst_env.verifiers.verdict import VerifyContext

PROBED = (
    "chart_figure",
    "dabench",
    "dacode_csv",
    "dacode_text",
    "exact",
    "list",
    "numeric",
    "rubric",
    "set",
    "sql_execution",
    "tablebench",
    "workbook_match",
)
"""The scorers this module knows the answers of. Others (``llm_judge``, which needs its
service, and scorers a project registers itself) are reported as not probed."""

NOTES = {"dacode_csv": "answer text only (the output files are scored by the null run)"}


@dataclass
class ProbeResult:
    """What probing one task found."""

    scorer: str
    adversarial_tried: int = 0
    adversarial_nonzero: list[str] = field(default_factory=list)
    natural_tried: int = 0
    natural_failed: list[str] = field(default_factory=list)
    probed: bool = True
    note: str | None = None


def _reward(task: Task, probe: Probe, profile: str) -> float | str:
    """The probe's reward, or why the scorer raised (scorers must not raise on any answer)."""
    files = probe.files

    def read_file(name: str) -> bytes:
        if files is None or name not in files:
            raise FileNotFoundError(name)
        return files[name]

    context = VerifyContext(task_files=dict(task.files), read_file=read_file)
    try:
        return judge(task.verifier, probe.answer, task.answer, context, profile=profile).reward
    except Exception as exc:  # noqa: BLE001 - a raising scorer is a finding, reported by name
        return f"raised {type(exc).__name__}: {str(exc)[:120]}"


def probe_task(task: Task, profile: str = "strict") -> ProbeResult:
    """Score every probe of ``task``: adversarial ones must score 0, natural ones 1."""
    name = task.verifier.name
    result = ProbeResult(scorer=name, note=NOTES.get(name))
    if task.verify:
        result.probed, result.note = False, "scored by its verify hooks"
        return result
    if name not in PROBED:
        result.probed, result.note = False, "no generator for this scorer"
        return result
    adversarial, natural = probes_for(task)
    for probe in adversarial:
        result.adversarial_tried += 1
        reward = _reward(task, probe, profile)
        if reward != 0.0:
            result.adversarial_nonzero.append(probe.label + _why(reward))
    for probe in natural:
        result.natural_tried += 1
        reward = _reward(task, probe, profile)
        if reward != 1.0:
            result.natural_failed.append(probe.label + _why(reward))
    return result


def _why(reward: float | str) -> str:
    return f" ({reward})" if isinstance(reward, str) else ""


def summarize(results: Iterable[ProbeResult]) -> dict[str, dict[str, Any]]:
    """Per scorer: tasks probed (and not, with why), adversarial tried / scored 0, natural
    tried / scored 1."""
    table: dict[str, dict[str, Any]] = {}
    for r in results:
        row = table.setdefault(
            r.scorer,
            {
                "tasks": 0,
                "adversarial_tried": 0,
                "adversarial_scored_0": 0,
                "natural_tried": 0,
                "natural_scored_1": 0,
                "not_probed": {},
                "note": None,
            },
        )
        if not r.probed:
            row["not_probed"][r.note] = row["not_probed"].get(r.note, 0) + 1
            continue
        row["tasks"] += 1
        row["note"] = row["note"] or r.note
        row["adversarial_tried"] += r.adversarial_tried
        row["adversarial_scored_0"] += r.adversarial_tried - len(r.adversarial_nonzero)
        row["natural_tried"] += r.natural_tried
        row["natural_scored_1"] += r.natural_tried - len(r.natural_failed)
    return dict(sorted(table.items()))


__all__ = [
    "JUNK",
    "PROBED",
    "Probe",
    "ProbeResult",
    "is_nan_text",
    "numeric_probes",
    "probe_task",
    "probes_for",
    "summarize",
]
