"""The registry that maps verifier names to scorers, :func:`judge`, and the plain scorers.

The plain scorers, ``exact`` and ``numeric``, live here; the others in their own
modules (``list`` and ``set`` in :mod:`~analyst_env.verifiers.collection_scorers`,
``dabench`` in :mod:`~analyst_env.verifiers.dabench_rule`, the benchmark and file
scorers in theirs). :data:`SCORER_TABLE` names each one's place, one line a scorer,
and importing :mod:`analyst_env.verifiers` loads every one of them (so a scoring
child forked from the server has them all).

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

import functools
import inspect
from collections.abc import Callable
from typing import Any

from analyst_env.entry_points import Registry
from analyst_env.task_format import VerifierSpec
from analyst_env.verifiers.explain import explain
from analyst_env.verifiers.normalize import as_number, close, normalize_text, parse_number
from analyst_env.verifiers.verdict import Verdict, VerifyContext

Scorer = Callable[..., float | Verdict]

SCORER_TABLE: dict[str, str] = {
    "exact": "analyst_env.verifiers.scorers:exact",
    "numeric": "analyst_env.verifiers.scorers:numeric",
    "list": "analyst_env.verifiers.collection_scorers:ordered_list",
    "set": "analyst_env.verifiers.collection_scorers:unordered_set",
    "dabench": "analyst_env.verifiers.dabench_rule:dabench",
    "tablebench": "analyst_env.verifiers.tablebench:tablebench",
    "dacode_csv": "analyst_env.verifiers.dacode:dacode_csv",
    "dacode_text": "analyst_env.verifiers.dacode:dacode_text",
    "sql_execution": "analyst_env.verifiers.sql_execution:sql_execution",
    "workbook_match": "analyst_env.verifiers.workbook_match:workbook_match",
    "llm_judge": "analyst_env.verifiers.llm_judge:llm_judge",
    "chart_figure": "analyst_env.verifiers.chart_figure:chart_figure",
    "rubric": "analyst_env.verifiers.rubric:rubric",
}
"""The package's scorers: the verifier name a task gives in ``VerifierSpec.name``, and
where its function lives. Another package adds its own under the entry-point group
``analyst_env.scorers``."""

SCORERS: Registry = Registry("verifier", SCORER_TABLE, "analyst_env.scorers")


def register(name: str) -> Callable[[Scorer], Scorer]:
    """Put a scorer made at run time (a test, a notebook) under ``name`` (decorator); the
    package's own are in :data:`SCORER_TABLE`.

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
        raise ValueError(SCORERS.unknown(spec.name)) from None
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
