"""Where a task's gold could reach the agent before it answers: the ``leak`` check of validation.

:mod:`analyst_env.evaluation.validation` runs each task's oracle, null and repeat
episodes and hands their frames here; this module says which values are the task's gold,
which of them are distinctive enough to look for, and where one of them shows.

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
(``prompts``: the system prompt and the tool-calling template), which
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
The null run (reset, ``list_files``, empty answer) is scanned entirely: the reset
observation, the state after reset, the ``list_files`` observation, the final
observation and the final state.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Iterator
from typing import Any, cast

from analyst_env.datasets import Task, describe_file

MIN_GOLD_CHARS = 3
COMMON_VALUES = frozenset(
    {"yes", "no", "true", "false", "none", "null", "nan", "inf", "-inf", "n/a", "na", "all", "any"}
)

_NUMBER_TOKEN = re.compile(r"[-+]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?")


# ── gold values and how to spot them ──
def _as_float(text: str) -> float | None:
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _atoms(value: Any) -> Iterator[Any]:
    """The atomic values inside a gold answer (dict keys and booleans excluded).

    A rubric gold (``verifiers/rubric.py``) gives its finding and its entity and number
    values only: fact kinds, rival names and directions are not the answer. A chart gold
    (``verifiers/chart_match.py``) gives its series' values only: its file name, kind, axis
    labels, group labels and histogram edges are what the task itself states."""
    if isinstance(value, dict) and isinstance(value.get("facts"), list):
        yield value.get("finding")
        for fact in value["facts"]:
            if isinstance(fact, dict) and fact.get("kind") in ("entity", "number"):
                yield from _atoms(fact.get("value"))
    elif isinstance(value, dict) and "figure" in value and "kind" in value:
        for key in ("values", "points", "counts"):
            yield from _atoms(value.get(key))
    elif isinstance(value, dict):
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
    from analyst_env.prompts import SYSTEM_PROMPT, hermes_tools_prompt

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


# ── the three runs of one task ──
ORACLE_FRAMES_SCANNED = ("reset", "state:reset")
"""The oracle runs' frames scanned for leaks: before its own steps show the gold."""

Frames = list[tuple[str, Any]]
"""One run's frames as ``run_episode`` records them: ``(label, data)`` in order."""


def scan_runs(task: Task, frames: dict[str, Frames]) -> tuple[str | None, int]:
    """Where a gold value shows in the scanned frames (or None), and how many values were sought.

    ``frames`` holds the ``"oracle"``, ``"null"`` and ``"repeat"`` runs' frames.
    """
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
