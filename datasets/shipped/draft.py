"""Question drafts: a computed answer plus how it must be written and scored.

The question templates (the ``*_tasks`` modules: ``sales_tasks``,
``retail_tasks``, ``excel_tasks`` and the rest) return ``Draft`` objects;
:func:`to_task` turns one into a ``Task`` by adding the file pointer, the
answer-format sentence, the oracle text and the verifier.
Keeping the format sentence and the verifier in one place guarantees that the
rounding the question asks for is the rounding the scorer tolerates.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from analyst_env.task_format import Task, VerifierSpec

T = TypeVar("T")


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


def number(question: str, value: float, decimals: int, level: str, **params: Any) -> Draft:
    """A float answer to be given rounded to ``decimals`` places."""
    return Draft(
        question,
        round(float(value), decimals),
        "number",
        level,
        decimals=decimals,
        params=params,
        exact=float(value),
    )


def integer(question: str, value: int, level: str, **params: Any) -> Draft:
    """A count or other whole-number answer."""
    return Draft(question, int(value), "integer", level, params=params)


def text(question: str, value: str, what: str, level: str, **params: Any) -> Draft:
    """A single label answer (a name, a month, a code)."""
    return Draft(question, str(value), "text", level, what=what, params=params)


def members(question: str, values: list[str], what: str, level: str, **params: Any) -> Draft:
    """An unordered collection answer."""
    return Draft(question, [str(v) for v in values], "set", level, what=what, params=params)


def ranking(
    question: str, values: list[str], what: str, order: str, level: str, **params: Any
) -> Draft:
    """An ordered list answer."""
    return Draft(
        question, [str(v) for v in values], "list", level, what=what, order=order, params=params
    )


def parts(question: str, items: list[tuple[str, float, int]], level: str, **params: Any) -> Draft:
    """A multi-part ``@name[value]`` answer scored with the DABench rule."""
    answer = [(n, _fmt(v, d)) for n, v, d in items]
    what = "; ".join(
        f"{n} as an integer" if d == 0 else f"{n} rounded to {d} decimal places"
        for n, _, d in items
    )
    return Draft(question, answer, "parts", level, decimals=0, what=what, params=params)


def _fmt(value: float, decimals: int) -> str:
    if decimals == 0:
        return str(int(round(float(value))))
    return f"{round(float(value), decimals):.{decimals}f}"


def format_sentence(d: Draft) -> str:
    if d.style == "number":
        return (
            f"Give your final answer as a single number rounded to {d.decimals} decimal places, "
            "without units."
        )
    if d.style == "integer":
        return "Give your final answer as a single integer."
    if d.style == "text":
        return f"Give your final answer as the {d.what} only, written exactly as in the data."
    if d.style == "set":
        return (
            f'Give your final answer as a JSON list of {d.what} (e.g. ["x", "y"]); order does '
            "not matter."
        )
    if d.style == "list":
        return f"Give your final answer as a JSON list of {d.what}, {d.order}."
    if d.style == "parts":
        layout = " ".join(f"@{n}[value]" for n, _ in d.answer)
        return f"Your final answer must contain {layout}, with {d.what}."
    raise ValueError(f"unknown draft style {d.style!r}")


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


def to_task(
    d: Draft, task_id: str, file_name: str, file_path: str, kind: str, template: str, split: str
) -> Task:
    """Build the ``Task`` for a draft whose data lives in ``file_name``."""
    noun = {"csv": "CSV file", "sqlite": "SQLite database", "excel": "Excel workbook"}[kind]
    instruction = (
        f"{d.question}\n\nThe data is in the {noun} `{file_name}` in your working directory.\n\n"
        f"{format_sentence(d)}"
    )
    oracle, gold, verifier = oracle_and_verifier(d)
    return Task(
        id=task_id,
        instruction=instruction,
        files={file_name: file_path},
        answer=gold,
        oracle_answer=oracle,
        verifier=verifier,
        split=split,
        metadata={
            "source": "starter",
            "level": d.level,
            "kind": kind,
            "template": template,
            "params": d.params,
        },
    )


def pick(rng: Any, values: Any) -> str:
    """One of the distinct non-missing ``values`` (as text), drawn with ``rng`` from their sorted
    list."""
    import pandas as pd

    return str(rng.choice(sorted(pd.unique(pd.Series(values).dropna()))))


def repeat(n: int) -> Callable[[T], T]:
    """Decorator: draw a template ``n`` times instead of its source's default count.

    Example:
        >>> @repeat(3)
        ... def tpl(data, rng): ...
        >>> tpl.reps
        3
    """

    def mark(template: T) -> T:
        template.reps = n  # type: ignore[attr-defined]
        return template

    return mark


def reuse_last(build: Callable[[Any], T]) -> Callable[[Any], T]:
    """Decorator for a derived-table builder: reuse its result while called with the very same input
    object.

    The generator hands every template of a source the same tables object, so
    a join or parse that many templates need runs once per source. Only the
    latest input is remembered (compared by identity), so memory stays
    bounded. Callers must not modify the returned frame.
    """
    slot: list[Any] = []

    @functools.wraps(build)
    def wrapper(data: Any) -> T:
        if slot and slot[0] is data:
            return slot[1]
        result = build(data)
        slot[:] = [data, result]
        return result

    return wrapper


ORDINAL = {1: "first", 2: "second", 3: "third"}
"""How a question names rank ``k`` (1-3) of an :func:`nth_label` answer: "ranks second"."""
HIGHEST = {1: "highest", 2: "second-highest", 3: "third-highest"}
"""The same ranks said of a value: "the second-highest salary"."""


def nth_label(values: Any, k: int, ascending: bool = False) -> str | None:
    """Label ranked ``k``-th (1-based) in a pandas Series, or ``None`` if ties make ranks 1..k
    ambiguous.

    Example:
        >>> import pandas as pd
        >>> nth_label(pd.Series({"a": 3, "b": 5, "c": 1}), 2)
        'a'
    """
    top = top_labels(values, k, ascending)
    return top[-1] if top else None


def top_labels(values: Any, k: int, ascending: bool = False) -> list[str] | None:
    """Labels of the ``k`` best entries of a pandas Series, or ``None`` if a tie makes the cut
    ambiguous.

    Example:
        >>> import pandas as pd
        >>> top_labels(pd.Series({"a": 3, "b": 5, "c": 1}), 2)
        ['b', 'a']
        >>> top_labels(pd.Series({"a": 3, "b": 3}), 1) is None
        True
    """
    s = values.dropna().sort_values(ascending=ascending, kind="stable")
    if len(s) < k:
        return None
    vals = s.round(9).tolist()
    if len(set(vals[:k])) < k or (len(vals) > k and vals[k - 1] == vals[k]):
        return None
    return [str(x) for x in s.index[:k]]
