"""Built-in answer scorers and the registry that maps verifier names to them.

A task names its scorer in ``VerifierSpec.name``; the server calls
:func:`judge` with the agent's ``final_answer`` text. Every scorer has the
signature ``(submitted: str, gold: Any, **params) -> float | Verdict`` and
returns a reward in ``[0, 1]``; one that needs the task's or the episode's
files also declares ``context: VerifyContext``. Scorers never raise on malformed submitted text: an
answer that cannot be read is simply wrong (0.0).

Example:
    >>> from analyst_env.task_format import VerifierSpec
    >>> score(VerifierSpec(name="numeric", params={"abs_tol": 0.01}), "It is 3.14", 3.1416)
    1.0
    >>> score(VerifierSpec(name="exact"), "'North'.", "north")
    1.0
"""

from __future__ import annotations

import ast
import functools
import inspect
import json
import re
from collections.abc import Callable
from typing import Any

from analyst_env.task_format import VerifierSpec
from analyst_env.verifiers.explain import explain
from analyst_env.verifiers.normalize import as_number, close, normalize_text, parse_number
from analyst_env.verifiers.verdict import Verdict, VerifyContext

Scorer = Callable[..., float | Verdict]

SCORERS: dict[str, Scorer] = {}


def register(name: str) -> Callable[[Scorer], Scorer]:
    """Register a scorer under ``name`` (decorator).

    Args:
        name: The verifier name tasks use in ``VerifierSpec.name``.
    """

    def deco(fn: Scorer) -> Scorer:
        SCORERS[name] = fn
        return fn

    return deco


PROFILES = ("strict", "official")
"""Scoring profiles. ``strict`` (the default, for training) closes every loophole we
know of in a benchmark's own rule; ``official`` reproduces each benchmark's
scorer as published, loopholes included, for numbers comparable with papers.
A scorer that differs between them declares a ``profile`` parameter."""


def judge(
    spec: VerifierSpec,
    submitted: str,
    gold: Any,
    context: VerifyContext | None = None,
    profile: str = "strict",
) -> Verdict:
    """Score a submitted answer with the scorer ``spec`` names, keeping the breakdown.

    Args:
        spec: Scorer name and parameters.
        submitted: The agent's final answer text.
        gold: The task's gold answer.
        context: Task files and the episode's files, for scorers that declare
            a ``context`` parameter.
        profile: ``"strict"`` or ``"official"`` (see :data:`PROFILES`), for
            scorers that declare a ``profile`` parameter.

    Returns:
        The verdict, its reward clamped to ``[0, 1]`` (NaN counts as 0).

    Raises:
        ValueError: If ``spec.name`` is not a registered scorer, or ``profile`` is unknown.
    """
    if profile not in PROFILES:
        raise ValueError(f"unknown scoring profile {profile!r}; known: {', '.join(PROFILES)}")
    try:
        fn = SCORERS[spec.name]
    except KeyError:
        known = ", ".join(sorted(SCORERS))
        raise ValueError(f"unknown verifier {spec.name!r}; known: {known}") from None
    if submitted is None:
        return Verdict(0.0, detail="no answer")
    extra: dict[str, Any] = {"context": context or VerifyContext()} if _wants(fn, "context") else {}
    if _wants(fn, "profile") and "profile" not in spec.params:
        extra["profile"] = profile
    result = fn(str(submitted), gold, **spec.params, **extra)
    verdict = result if isinstance(result, Verdict) else Verdict(float(result))
    reward = verdict.reward if verdict.reward == verdict.reward else 0.0
    reward = min(1.0, max(0.0, reward))
    detail = verdict.detail
    if reward < 1.0 and not detail:  # a bare 0: say what was read and which rule it failed
        detail = explain(spec.name, str(submitted), gold, spec.params)
    return Verdict(reward, verdict.components, detail)


def score(
    spec: VerifierSpec, submitted: str, gold: Any, context: VerifyContext | None = None
) -> float:
    """The reward alone; see :func:`judge`."""
    return judge(spec, submitted, gold, context).reward


@functools.cache
def _wants(fn: Scorer, parameter: str) -> bool:
    return parameter in inspect.signature(fn).parameters


@register("exact")
def exact(submitted: str, gold: Any) -> float:
    """1.0 iff the normalized texts are equal (case, spacing, quotes, trailing period ignored).

    Example:
        >>> exact("  Electronics. ", "electronics")
        1.0
        >>> exact("", "electronics")
        0.0
    """
    want = normalize_text(gold)
    return 1.0 if want and normalize_text(submitted) == want else 0.0


@register("numeric")
def numeric(
    submitted: str,
    gold: Any,
    rel_tol: float = 0.0,
    abs_tol: float = 1e-6,
    decimals: int | None = None,
    exact: float | None = None,
) -> float:
    """1.0 iff the number stated in the answer is within tolerance of ``gold``.

    The number is the one the answer states (the rule is in
    :mod:`~analyst_env.verifiers.normalize`): "The answer is 42.0", "$1,234"
    and "251.14 (rounded to 2 decimal places)" parse; "Either 200 or 251.14"
    states no single number and scores 0.

    Args:
        submitted: Answer text.
        gold: The gold number (or a numeric string).
        rel_tol: Relative tolerance.
        abs_tol: Absolute tolerance (default 1e-6).
        decimals: The answer was asked rounded to this many places (``gold``
            is rounded so): it pays iff it rounds to the gold, i.e. is within
            half a unit of the last place of ``exact`` (else of ``gold``). A
            value one unit off does not pay (an answer of 3.15 for 3.14159),
            but at a tie (``exact`` 1.005) both roundings do (1.00 and 1.01).
            Replaces ``abs_tol``.
        exact: The unrounded value, where the gold was rounded from one.

    Example:
        >>> numeric("The answer is 42.0", 42)
        1.0
        >>> numeric("41.9", 42, abs_tol=0.05)
        0.0
        >>> numeric("Either 41 or 42", 42)
        0.0
        >>> [numeric(a, 3.14, decimals=2, exact=3.14159) for a in ("3.14", "3.1416", "3.15")]
        [1.0, 1.0, 0.0]
        >>> [numeric(a, 1.0, decimals=2, exact=1.005) for a in ("1.00", "1.01", "1.02")]
        [1.0, 1.0, 0.0]
    """
    want = as_number(gold)
    got = parse_number(submitted)
    if want is None or got is None:
        return 0.0
    if decimals is not None:
        want = float(exact) if exact is not None else want
        abs_tol = 0.5 * 10.0 ** -int(decimals) * (1 + 1e-9) + 1e-12 * abs(want)
    return 1.0 if close(got, want, rel_tol=rel_tol, abs_tol=abs_tol) else 0.0


_DABENCH_PART = re.compile(r"@(\w+)\[(.*?)\]")


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


@register("dabench")
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


_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+(?=\S)")
_NOTE_HEDGE = re.compile(
    r"\b(?:or|either|maybe|perhaps|possibly|alternatively|instead|otherwise)\b|/|\?", re.I
)


MAX_NOTES = 4
"""Bracketed notes read after a list; more is not a note (and each costs a parse)."""


def _list_literal(chunk: str) -> list | tuple | None:
    """``chunk`` as a JSON (or Python literal) list, else ``None``."""
    for loader in (json.loads, ast.literal_eval):
        try:
            value = loader(chunk)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        return value if isinstance(value, (list, tuple)) else None
    return None


def _bracket_groups(text: str, start: int, quotes: bool = True) -> list[tuple[int, int]]:
    """``(start, end)`` of each top-level ``[...]`` from ``start`` on, in one pass.

    With ``quotes``, brackets inside quoted strings do not count (an unclosed
    quote ends the scan); the cost stays linear in the text.
    """
    groups: list[tuple[int, int]] = []
    depth, quote, opened = 0, "", 0
    i = start
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif quotes and depth and c in "\"'":
            quote = c
        elif c == "[":
            opened = i if depth == 0 else opened
            depth += 1
        elif c == "]" and depth:
            depth -= 1
            if depth == 0:
                groups.append((opened, i + 1))
        i += 1
    return groups


def _list_before_note(text: str, start: int) -> list | tuple | None:
    """The first bracketed list when what follows it is a note, not another candidate.

    ``'["a", "b"] [note: sorted by count]'`` is the list ``["a", "b"]``. Refused
    (``None``): a second group that is itself a list (``["a"] ["b"]``: two
    answers), or a rest that hedges (``[or maybe "c"]``).
    """
    groups = _bracket_groups(text, start)
    if not groups:
        return None
    first = _list_literal(text[groups[0][0] : groups[0][1]])
    if first is None:
        return None
    end = groups[0][1]
    if _NOTE_HEDGE.search(text, end):
        return None
    later = groups[1:] + _bracket_groups(text, end, quotes=False)
    if len(later) > 2 * MAX_NOTES:  # a note or two, not a string of candidates
        return None
    if any(_list_literal(text[a:b]) is not None for a, b in later):
        return None
    return first


def parse_collection(text: str) -> list[str] | None:
    """Read an answer as a list of element strings.

    Accepts a JSON (or Python literal) list, possibly embedded in prose, or
    items separated by newlines (bullets and ``1.`` numbering stripped), or by
    commas / semicolons.

    Returns:
        The elements as strings, or ``None`` if there are none.

    Example:
        >>> parse_collection('Top: ["North", "East"]')
        ['North', 'East']
        >>> parse_collection("1. North\\n2. East")
        ['North', 'East']
        >>> parse_collection("North; East"), parse_collection("1. Green Line")
        (['North', 'East'], ['Green Line'])
    """
    text = text.strip()
    if not text:
        return None
    start, end = text.find("["), text.rfind("]")
    if 0 <= start < end:
        value = _list_literal(text[start : end + 1])
        if value is None:  # '["a", "b"] [note: sorted by count]': the list, if the rest is a note
            value = _list_before_note(text, start)
        if value is not None:
            items = [v if isinstance(v, str) else json.dumps(v) for v in value]
            return [i for i in items if i.strip()] or None
    if "\n" in text:
        items = [_BULLET.sub("", line) for line in text.splitlines()]
    else:  # one line: "1. North" or "- North" is a list of one
        items = re.split(r"[;,]", _BULLET.sub("", text))
    items = [i.strip() for i in items if i.strip()]
    return items or None


def _element_equal(a: Any, b: Any, rel_tol: float, abs_tol: float) -> bool:
    na, nb = as_number(a), as_number(b)
    if na is not None and nb is not None:
        return close(na, nb, rel_tol=rel_tol, abs_tol=abs_tol)
    return normalize_text(a) == normalize_text(b)


def _gold_items(gold: Any) -> list[Any] | None:
    if isinstance(gold, str):
        return parse_collection(gold)
    try:
        return list(gold)
    except TypeError:
        return None


@register("list")
def ordered_list(submitted: str, gold: Any, rel_tol: float = 0.0, abs_tol: float = 1e-6) -> float:
    """1.0 iff the answer lists the gold elements in the gold order.

    Elements compare as normalized text, or as numbers within tolerance.

    Example:
        >>> ordered_list('["East", "north"]', ["East", "North"])
        1.0
        >>> ordered_list("North, East", ["East", "North"])
        0.0
    """
    want, got = _gold_items(gold), parse_collection(submitted)
    if not want or got is None or len(want) != len(got):
        return 0.0
    ok = all(_element_equal(g, w, rel_tol, abs_tol) for g, w in zip(got, want))
    return 1.0 if ok else 0.0


def _dedupe(items: list[Any]) -> list[Any]:
    seen: dict[str, Any] = {}
    for item in items:
        n = as_number(item)
        seen.setdefault(repr(n) if n is not None else normalize_text(item), item)
    return list(seen.values())


@register("set")
def unordered_set(submitted: str, gold: Any, rel_tol: float = 0.0, abs_tol: float = 1e-6) -> float:
    """1.0 iff the answer holds exactly the gold elements, in any order.

    Duplicates are ignored on both sides. Elements compare as normalized text,
    or as numbers within tolerance.

    Example:
        >>> unordered_set("East, North", ["North", "East"])
        1.0
        >>> unordered_set("East", ["North", "East"])
        0.0
    """
    want, got = _gold_items(gold), parse_collection(submitted)
    if not want or got is None:
        return 0.0
    want, got = _dedupe(want), _dedupe(got)
    if len(want) != len(got):
        return 0.0
    remaining = list(got)
    for w in want:
        match = next(
            (i for i, g in enumerate(remaining) if _element_equal(g, w, rel_tol, abs_tol)), None
        )
        if match is None:
            return 0.0
        remaining.pop(match)
    return 1.0
