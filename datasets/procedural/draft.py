"""Question drafts: a computed answer plus how it must be written and scored.

The generator (``generator._draft``) turns each computed answer into a ``Draft``;
``phrasing.format_request`` words the answer-format sentence from the same draft and
:func:`oracle_and_verifier` picks the gold text and the scorer. Keeping both on one
object guarantees that the rounding the question asks for is the rounding the scorer
tolerates; :func:`leaks` drops a question that states its own answer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from analyst_env.task_format import VerifierSpec


@dataclass
class Draft:
    """One generated question before it becomes a ``Task``.

    Attributes:
        question: The analyst question, without the answer-format sentence.
        answer: Gold value: float, int, str, list of str, or list of (name, value, decimals).
        style: One of ``number``, ``integer``, ``text``, ``set``, ``list``, ``parts``.
        level: ``easy``, ``medium`` or ``hard``.
        decimals: Rounding asked for (``number`` style).
        exact: The unrounded value of a ``number`` answer, for the scorer to tell a
            tie (both roundings right) from an answer one unit off.
        what: Noun phrase for the format sentence, e.g. "region name".
        order: Ordering phrase for ``list`` answers.
        params: The template's parameters (public; they are in the question anyway).
    """

    question: str
    answer: Any
    style: str
    level: str
    decimals: int = 0
    what: str = ""
    order: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    exact: float | None = None


def _fmt(value: float, decimals: int) -> str:
    if decimals == 0:
        return str(int(round(float(value))))
    return f"{round(float(value), decimals):.{decimals}f}"


def oracle_and_verifier(d: Draft) -> tuple[str, Any, VerifierSpec]:
    """The oracle text, the stored gold answer and the verifier for a draft."""
    if d.style == "number":
        # An answer that rounds to the gold pays, not one a unit off (docs/rewards.md).
        exact = {} if d.exact is None else {"exact": d.exact}
        return (
            _fmt(d.answer, d.decimals),
            d.answer,
            VerifierSpec(name="numeric", params={"decimals": d.decimals, **exact}),
        )
    if d.style == "integer":
        return str(d.answer), d.answer, VerifierSpec(name="numeric")
    if d.style == "text":
        return d.answer, d.answer, VerifierSpec(name="exact")
    if d.style in ("set", "list"):
        return json.dumps(d.answer), d.answer, VerifierSpec(name=d.style)
    if d.style == "parts":
        gold = [[n, v] for n, v in d.answer]
        return " ".join(f"@{n}[{v}]" for n, v in gold), gold, VerifierSpec(name="dabench")
    raise ValueError(f"unknown draft style {d.style!r}")


def leaks(instruction: str, oracle: str, style: str) -> bool:
    """Whether the instruction spells out a numeric or label answer verbatim.

    A number counts as spelled out anywhere in the text, even as part of a
    longer number; a label only as a whole word.

    Example:
        >>> leaks("How many orders above 12 units?", "12", "integer")
        True
        >>> leaks("How many orders above 12 units?", "120", "integer")
        False
        >>> leaks("How many orders in 2022?", "22", "integer")
        True
    """
    if style in ("number", "integer"):
        if oracle in instruction:  # even inside another number, e.g. "22" in "2022"
            return True
        core = oracle.lstrip("-")
        return re.search(rf"(?<![\d.]){re.escape(core)}(?![\d]|\.\d)", instruction) is not None
    if style == "text":
        return (
            re.search(rf"(?<!\w){re.escape(oracle.casefold())}(?!\w)", instruction.casefold())
            is not None
        )
    return False
