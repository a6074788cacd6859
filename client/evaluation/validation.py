"""Check that every task of a dataset is sound, over the protocol: ``analyst-env validate``.

A dataset is sound when, for each task, through the real server:

- **oracle**: replaying ``task.oracle_steps`` and submitting ``task.oracle_answer``
  scores exactly 1.0 (the task is solvable and its gold agrees with its scorer);
- **null**: the null run scores exactly 0.0 (saying nothing earns nothing);
- **repeat**: the oracle run a second time scores the same as the first (the
  verifier is deterministic);
- **leak**: no gold value reaches the agent before it answers (below);
- **adversarial**: every answer :mod:`analyst_env.verifiers.adversarial` builds
  from the task's gold to game its scorer (empty, "all of them", hedges that
  name the gold among other candidates, supersets, NaN, files the scorer must
  refuse...) scores exactly 0, offline, under the ``strict`` profile;
- **natural**: every natural correct form that module builds for the scorer
  (thousand separators, prose around the number, another order where order
  does not matter...) scores exactly 1.

The report counts, per scorer, the adversarial answers tried and the natural
forms tried, and how many scored as they must.

Episodes run with :func:`analyst_env.client.evaluation.engine.run_episode`, which
hands every frame to the leak scan; a task's three runs go one after another
(oracle, null, repeat), tasks run concurrently.

**The null run** is: reset, ``list_files``, ``final_answer("")``. The
``list_files`` step makes anything a setup hook put in the working directory
visible, so a gold value written into a file *name* (or any other sign of it
that reaches the agent before it answers) is caught.

**Gold values** of a task are the ``oracle_answer`` text and every atomic value
inside ``task.answer`` (lists, tuples and dict values are walked; dict keys and
booleans are not values): a string as it is; a number as the task prints it,
i.e. ``str(x)``, its integer form if it is integral, and every number written in
``oracle_answer`` that equals it. A value is dropped as not distinctive when it
is shorter than 3 characters, is a common word (``yes``, ``true``, ``none``...),
is a number equal to 0, 1 or -1, or already occurs in what the task shows by
design: its id, instruction, ``max_steps`` and the reset's file descriptions
(names, sizes, previews, computed locally from the task's files).

Text shared by every task is **not** counted as shown by design, because one
task's gold written into it is a gift to every episode: the tool catalogue
(it is in the reset frame, so the null run scans it) and the trainer prompts
(``client.trainers.prompts``: the system prompt and the tool-calling template), which
are scanned as a frame of their own.

**Matching** is case-insensitive on whole tokens: a value that starts or ends
with a letter or digit must not continue into one (and a number must not
continue into a longer number, so ``119`` does not match ``1190`` or ``0.119``).
It looks at every string and number of a frame's data (not its JSON text, so
escaping hides nothing). Dict keys are the protocol's vocabulary (field names,
metadata names, reward component names such as ``ROUGE-L`` or ``part:n``) and
are not scanned, except inside a tool result's ``structured_content``, where
keys can be data.

**What is scanned**: the oracle's own tool outputs necessarily show the gold
after its steps (``run_sql`` of the gold query prints it), so for both oracle
runs only the reset observation and the state right after reset are scanned.
The null run is scanned entirely: the reset observation, the state after reset,
the ``list_files`` observation, the final observation and the final state.

**Quarantine.** Tasks whose metadata carries a ``gold_status`` other than
``"ok"`` (loaders set it to the evidence, e.g. ``"error: no such column"`` or
``"reference formulas wrong: ..."``, see :mod:`analyst_env.datasets.gold_audit`)
are still run and reported, under ``broken_upstream`` with that evidence, and
do not fail the validation; they are never dropped. Validation adds one
finding of its own: an upstream task (one whose loader records a
``gold_status``) that its untouched initial state already solves, i.e. whose
null run scores above 0, is quarantined as ``"solved by its initial state:
..."``. A task of our own with that fault fails the ``null`` check instead: it
is ours to fix. ``quarantine`` in the report counts them by reason.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import numbers
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, cast

from analyst_env.client.evaluation.engine import run_episode
from analyst_env.datasets import Task, describe_file
from analyst_env.datasets.gold_audit import GOLD_OK
from analyst_env.task_format import ToolCall
from analyst_env.verifiers.adversarial import ProbeResult, probe_task, summarize

CHECKS = ("oracle", "null", "repeat", "leak", "adversarial", "natural")
"""Names of the checks, as the report names a failing one."""

NULL_STEPS = [ToolCall(tool="list_files")]
"""The null run's tool calls before it submits the empty answer."""


MIN_GOLD_CHARS = 3
COMMON_VALUES = frozenset(
    {"yes", "no", "true", "false", "none", "null", "nan", "inf", "-inf", "n/a", "na", "all", "any"}
)

_NUMBER_TOKEN = re.compile(r"[-+]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?")

Row = dict[str, Any]


# ── gold values and how to spot them ──
def _as_float(text: str) -> float | None:
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _atoms(value: Any) -> Iterator[Any]:
    """The atomic values inside a gold answer (dict keys and booleans excluded)."""
    if isinstance(value, dict):
        for item in value.values():
            yield from _atoms(item)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            yield from _atoms(item)
    elif value is not None and not isinstance(value, bool):
        yield value


def _number_texts(x: float, oracle_answer: str) -> set[str]:
    """How a task prints ``x``: ``str(x)``, its int form, equal numbers in the oracle answer."""
    texts = {str(x)}
    if float(x).is_integer():
        texts.add(str(int(x)))
    for token in _NUMBER_TOKEN.findall(oracle_answer):
        parsed = _as_float(token)
        if parsed is not None and math.isclose(parsed, float(x), rel_tol=1e-12, abs_tol=1e-12):
            texts.add(token)
    return texts


def gold_values(task: Task) -> set[str]:
    """Every text form of the task's gold, before dropping the ones that are not distinctive."""
    values = {task.oracle_answer.strip()}
    for atom in _atoms(task.answer):
        if isinstance(atom, numbers.Real):
            if math.isfinite(float(atom)):
                # an answer is JSON: its numbers are ints or floats
                values |= _number_texts(cast(float, atom), task.oracle_answer)
        else:
            text = str(atom).strip()
            values.add(text)
            number = _as_float(text)
            if number is not None:
                values |= _number_texts(number, task.oracle_answer)
    return {v for v in values if v}


def value_pattern(value: str) -> re.Pattern[str]:
    """A case-insensitive whole-token pattern for ``value`` (see the module docstring)."""
    numeric = _as_float(value) is not None
    head = r"(?<![\w.])" if numeric else r"(?<!\w)"
    tail = r"(?!\w|\.\d)" if numeric else r"(?!\w)"
    body = re.escape(value)
    if value[0].isalnum() or (numeric and value[0] == "."):
        body = head + body
    if value[-1].isalnum():
        body = body + tail
    return re.compile(body, re.IGNORECASE)


def _trivial(value: str) -> bool:
    if len(value) < MIN_GOLD_CHARS or value.lower() in COMMON_VALUES:
        return True
    number = _as_float(value)
    return number is not None and number in (0.0, 1.0, -1.0)


def public_text(task: Task) -> str:
    """What the task shows by design: id, instruction, step limit, file descriptions."""
    parts = [task.id, task.instruction, f"max_steps {task.max_steps}"]
    parts += [
        describe_file(name, path).model_dump_json() for name, path in sorted(task.files.items())
    ]
    return "\n".join(parts)


def prompt_frame(tool_catalogue: Any) -> dict[str, str]:
    """The trainer-facing texts every task shares: the system prompt and the tool-calling prompt."""
    from analyst_env.client.trainers.prompts import SYSTEM_PROMPT, hermes_tools_prompt

    return {
        "system_prompt": SYSTEM_PROMPT,
        "tools_prompt": hermes_tools_prompt(tool_catalogue or []),
    }


def leak_patterns(task: Task) -> dict[str, re.Pattern[str]]:
    """The distinctive gold values of ``task`` and their patterns."""
    shown = public_text(task)
    patterns = {}
    for value in sorted(gold_values(task)):
        if _trivial(value):
            continue
        pattern = value_pattern(value)
        if not pattern.search(shown):
            patterns[value] = pattern
    return patterns


DATA_KEYS_UNDER = "structured_content"
"""Below a key of this name, dict keys are tool output (data), so they are scanned too."""


def _walk(data: Any, path: str = "", keys: bool = False) -> Iterator[tuple[str, str]]:
    """``(json path, text)`` for every string and number in ``data`` (and key, when ``keys``)."""
    if isinstance(data, dict):
        for key, item in data.items():
            sub = f"{path}.{key}" if path else str(key)
            if keys:
                yield sub, str(key)
            yield from _walk(item, sub, keys or key == DATA_KEYS_UNDER)
    elif isinstance(data, (list, tuple)):
        for i, item in enumerate(data):
            yield from _walk(item, f"{path}[{i}]", keys)
    elif isinstance(data, (str, int, float)) and not isinstance(data, bool):
        yield path, str(data)


def find_leak(patterns: dict[str, re.Pattern[str]], data: Any) -> str | None:
    """Where the first gold value occurs in ``data``, as ``"'value' at path"``; None if nowhere."""
    for path, text in _walk(data):
        for value, pattern in patterns.items():
            if pattern.search(text):
                return f"{value!r} at {path or '(top)'}"
    return None


# ── one task ──
ORACLE_FRAMES_SCANNED = ("reset", "state:reset")
"""The oracle runs' frames scanned for leaks: before its own steps show the gold."""

Frames = list[tuple[str, Any]]


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


def _leak(task: Task, frames: dict[str, Frames]) -> tuple[str | None, int]:
    """Where a gold value shows in the scanned frames (or None), and how many values were sought."""
    catalogue = next(
        (
            data.get("observation", {}).get("available_tools")
            for label, data in frames["null"]
            if label == "reset"
        ),
        None,
    )
    patterns = leak_patterns(task)
    scanned = [("null", label, data) for label, data in frames["null"]]
    scanned.append(("shared", "prompts", prompt_frame(catalogue)))
    for run in ("oracle", "repeat"):
        scanned += [
            (run, label, data) for label, data in frames[run] if label in ORACLE_FRAMES_SCANNED
        ]
    for run, label, data in scanned:
        where = find_leak(patterns, data)
        if where is not None:
            return f"gold value {where} in the {run} run's {label} frame", len(patterns)
    return None, len(patterns)


async def validate_task(base_url: str, task: Task, headers: dict[str, str] | None = None) -> Row:
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
    leak, checked = _leak(task, frames)
    if leak is not None:
        failures.append({"check": "leak", "reason": leak})
    probes = await asyncio.to_thread(probe_task, task)
    failures += _probe_failures(probes)
    row: Row = {
        "task_id": task.id,
        **{name: runs[name].get("reward") for name in plans},
        "leak": leak,
        "gold_values_checked": checked,
        "probes": dataclasses.asdict(probes),
        "failures": failures,
    }
    if failures:
        row["reward_breakdown"] = {name: runs[name].get("reward_breakdown") for name in plans}
        for failure in failures:
            run = failure["check"] if failure["check"] in plans else "null"
            failure["reward_breakdown"] = runs[run].get("reward_breakdown")
    gold_status = task.metadata.get("gold_status")
    if gold_status == GOLD_OK and any(f["check"] == "null" for f in failures):
        gold_status = (
            f"solved by its initial state: the null run scored {_cell(runs['null'].get('reward'))}"
        )
    if gold_status not in (None, GOLD_OK):
        row["status"] = "broken_upstream"
        row["gold_status"] = gold_status
    else:
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
) -> list[Row]:
    """Validate every task, ``concurrency`` tasks at a time; rows in task order."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    gate = asyncio.Semaphore(concurrency)

    async def one(task: Task) -> Row:
        async with gate:
            row = await validate_task(base_url, task, headers)
        if on_result is not None:
            on_result(row)
        return row

    return list(await asyncio.gather(*(one(t) for t in tasks)))


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
        "scorers": summarize(ProbeResult(**r["probes"]) for r in rows if "probes" in r),
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
        f"failed={failed_tasks} broken_upstream={len(result['broken_upstream'])}"
    )
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
