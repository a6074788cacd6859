"""Why an answer did not pay, in one line a person reads, without giving the gold away.

Most scorers return a bare number; a 0 alone leaves whoever debugs the episode
(in /web, or reading a trainer's logs) guessing whether the answer was not read
at all, read in the wrong format, or read and wrong. :func:`explain` says what
the scorer read from the answer and which rule it failed: "read 41.9; not within
0.05 of the expected value". It never states the expected value itself: the
line travels in the final observation's metadata, which any client sees, and a
task is played many times.

Each explainer uses the same linear parsers as its scorer, so it is as safe to
run on a hostile answer as the scoring is (it runs where the scoring runs).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from analyst_env.verifiers.answer_lists import gold_items, parse_collection
from analyst_env.verifiers.normalize import normalize_text, parse_number

Explainer = Callable[..., str]
EXPLAINERS: dict[str, Explainer] = {}
SHOWN = 80  # characters of what was read, at most


def _explains(name: str) -> Callable[[Explainer], Explainer]:
    def add(fn: Explainer) -> Explainer:
        EXPLAINERS[name] = fn
        return fn

    return add


def _shown(text: str) -> str:
    return repr(text if len(text) <= SHOWN else text[: SHOWN - 1] + "…")


def explain(name: str, submitted: str, gold: Any, params: dict[str, Any]) -> str:
    """One line on why ``submitted`` did not pay under scorer ``name`` ("" if there is no
    explainer for it, or the explainer cannot say)."""
    fn = EXPLAINERS.get(name)
    if fn is None:
        return ""
    try:
        return fn(submitted, gold, **params)
    except (TypeError, ValueError):  # parameters this explainer does not know: say nothing
        return ""


@_explains("exact")
def _exact(submitted: str, gold: Any) -> str:
    read = normalize_text(submitted)
    if not read:
        return "the answer is empty after normalizing (case, spacing, quotes, a final period)"
    return f"read {_shown(read)} (case, spacing and quotes ignored); not the expected text"


def _tolerance(rel_tol: float, abs_tol: float, decimals: int | None) -> str:
    if decimals is not None:
        return f"does not round to the expected value at {decimals} decimal place(s)"
    parts = [f"{abs_tol:g} absolute"] if abs_tol else []
    parts += [f"{rel_tol:g} relative"] if rel_tol else []
    return f"not within {' or '.join(parts) or 'exact equality'} of the expected value"


@_explains("numeric")
def _numeric(
    submitted: str,
    gold: Any,
    rel_tol: float = 0.0,
    abs_tol: float = 1e-6,
    decimals: int | None = None,
    exact: float | None = None,
) -> str:
    got = parse_number(submitted)
    if got is None:
        return (
            "no single number could be read from the answer (state one number; "
            "an answer offering several candidates is not read)"
        )
    return f"read {got:g}; {_tolerance(rel_tol, abs_tol, decimals)}"


def _collection(submitted: str, gold: Any, ordered: bool) -> str:
    got, want = parse_collection(submitted), gold_items(gold)
    if got is None:
        return "no list could be read from the answer (a JSON list, one item per line, or commas)"
    count = f"{len(got)} item(s)"
    if want is not None and len(got) != len(want):
        return f"read {count}; the expected list has {len(want)}"
    rule = "in the expected order" if ordered else "in any order"
    return f"read {count}: {_shown(', '.join(got))}; they are not the expected items {rule}"


@_explains("list")
def _list(submitted: str, gold: Any, rel_tol: float = 0.0, abs_tol: float = 1e-6) -> str:
    return _collection(submitted, gold, ordered=True)


@_explains("set")
def _set(submitted: str, gold: Any, rel_tol: float = 0.0, abs_tol: float = 1e-6) -> str:
    return _collection(submitted, gold, ordered=False)
