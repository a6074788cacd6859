"""InfiAgent-DABench's closed-form rule: ``@name[value]`` parts compared with the labels.

Its own module because the rule has two parts of its own beyond the scorer: a
linear-time replacement for upstream's extraction regex (which a hostile answer
can make quadratic), and the repeated-name rule that differs between the
``strict`` and ``official`` profiles (:data:`~analyst_env.verifiers.scorers.PROFILES`).
"""

from __future__ import annotations

import re
from typing import Any

from analyst_env.verifiers.verdict import Verdict


def _dabench_equal(pred: str, label: str) -> bool:
    if pred == label:
        return True
    try:
        return abs(float(pred) - float(label)) < 1e-6
    except (TypeError, ValueError):
        return False


_DABENCH_OPEN = re.compile(r"@(\w+)\[")


def dabench_findall(text: str) -> list[tuple[str, str]]:
    """``re.findall(r"@(\\w+)\\[(.*?)\\]", text)`` (upstream's extraction) in linear time.

    The regex retries ``.*?`` from every ``@name[`` to the end of the line, so
    ``"@a[" * 16384`` cost it 4.7 s; here the next ``]`` and the next newline
    are found once per position.

    Example:
        >>> dabench_findall("@a[1] @b[x]y] @c[\\n] @d[2]")
        [('a', '1'), ('b', 'x'), ('d', '2')]
    """
    found = []
    pos, close, newline = 0, -1, -1
    while (m := _DABENCH_OPEN.search(text, pos)) is not None:
        start = m.end()
        if close < start:
            close = text.find("]", start)
            if close < 0:
                break
        if newline < start:
            newline = text.find("\n", start)
            newline = len(text) if newline < 0 else newline
        if close < newline:
            found.append((m.group(1), text[start:close]))
            pos = close + 1
        else:
            pos = m.start() + 1
    return found


def _dabench_parts(submitted: str, repeats: str) -> dict[str, str | None]:
    """``{name: value}`` of the answer's ``@name[value]`` parts; ``None`` for a name given different
    values
    (``repeats="refuse"``), or the last value (``repeats="last"``, upstream's dict)."""
    found: dict[str, str | None] = {}
    for name, value in dabench_findall(submitted):
        earlier = found.get(name)
        if (
            repeats == "refuse"
            and name in found
            and (earlier is None or not _dabench_equal(earlier, value))
        ):
            found[name] = None
        else:
            found[name] = value
    return found


def dabench(
    submitted: str,
    gold: Any,
    partial_credit: bool = False,
    repeats: str | None = None,
    profile: str = "strict",
) -> Verdict | float:
    """The InfiAgent-DABench closed-form rule.

    All ``@name[value]`` parts are extracted from the answer. A gold ``[name,
    value]`` part is correct iff the extracted string equals the label exactly,
    or both parse as floats and differ by less than 1e-6. Upstream keeps the
    last value when a name repeats, so ``@n[1] @n[2] @n[3]`` hedges for free;
    here a name stated with different values is wrong unless ``repeats="last"``.

    Args:
        submitted: Answer text.
        gold: List of ``[name, value]`` pairs (values are strings).
        partial_credit: If true, return the fraction of correct parts instead of all-or-nothing.
        repeats: ``"refuse"`` (a name with several different values is wrong) or
            ``"last"`` (upstream: the last one counts); default by profile.
        profile: ``"strict"`` (repeats refused) or ``"official"`` (the last one counts).

    Example:
        >>> dabench("@mean_fare[34.650] @n[3]", [["mean_fare", "34.65"], ["n", "3"]]).reward
        1.0
        >>> v = dabench("@mean_fare[34.65]", [["mean_fare", "34.65"], ["n", "3"]])
        >>> v.reward, v.components
        (0.0, {'part:mean_fare': 1.0, 'part:n': 0.0})
        >>> gold = [["mean_fare", "34.65"], ["n", "3"]]
        >>> dabench("@mean_fare[34.65]", gold, partial_credit=True).reward
        0.5
        >>> (
        ...     dabench("@n[2] @n[3]", [["n", "3"]]).reward,
        ...     dabench("@n[2] @n[3]", [["n", "3"]], repeats="last").reward,
        ... )
        (0.0, 1.0)
    """
    repeats = repeats or ("last" if profile == "official" else "refuse")
    if repeats not in ("refuse", "last"):
        raise ValueError(f"unknown repeats rule {repeats!r}; expected 'refuse' or 'last'")
    try:
        labels = [(str(name), str(value)) for name, value in gold]
    except (TypeError, ValueError):
        return 0.0
    if not labels:
        return 0.0
    found = _dabench_parts(submitted, repeats)
    parts = {
        name: float((value := found.get(name)) is not None and _dabench_equal(value, label))
        for name, label in labels
    }
    correct = sum(parts.values())
    reward = correct / len(labels) if partial_credit else float(correct == len(labels))
    return Verdict(
        reward,
        {f"part:{n}": v for n, v in parts.items()},
        f"{correct:g}/{len(labels)} parts correct",
    )
