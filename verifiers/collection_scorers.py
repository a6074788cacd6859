"""The ``list`` and ``set`` scorers: the answer's elements against the gold's.

Elements compare as normalized text, or as numbers within tolerance; how the
answer is read as a list is :mod:`~analyst_env.verifiers.answer_lists`.
"""

from __future__ import annotations

from typing import Any

from analyst_env.verifiers.answer_lists import gold_items, parse_collection
from analyst_env.verifiers.normalize import as_number, close, normalize_text


def _element_equal(a: Any, b: Any, rel_tol: float, abs_tol: float) -> bool:
    na, nb = as_number(a), as_number(b)
    if na is not None and nb is not None:
        return close(na, nb, rel_tol=rel_tol, abs_tol=abs_tol)
    return normalize_text(a) == normalize_text(b)


def ordered_list(submitted: str, gold: Any, rel_tol: float = 0.0, abs_tol: float = 1e-6) -> float:
    """1.0 iff the answer lists the gold elements in the gold order.

    Elements compare as normalized text, or as numbers within tolerance.

    Example:
        >>> ordered_list('["East", "north"]', ["East", "North"])
        1.0
        >>> ordered_list("North, East", ["East", "North"])
        0.0
    """
    want, got = gold_items(gold), parse_collection(submitted)
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
    want, got = gold_items(gold), parse_collection(submitted)
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
