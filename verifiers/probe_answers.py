"""Wrong and right answers built from a gold value: the raw material of the scorer probes.

For a number, a text, a list or set, or DABench parts, the answers a policy
might try instead of solving the task (hedges naming the gold among other
candidates, supersets, NaN, a wrong value) and the natural correct forms the
scorer documents (thousand separators, prose around the number, another order
where order does not matter...). Each is a plain short text; which of them a
task gets is :func:`~analyst_env.verifiers.task_probes.probes_for`.

Example:
    >>> adversarial, natural = numeric_probes("1234.5", 1234.5)
    >>> [p.answer for p in natural if p.label == "commas"]
    ['1,234.5']
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

JUNK = [
    "",
    " ",
    "all of them",
    "none",
    "nan",
    "inf",
    "-inf",
    "1e309",
    "{}",
    "[]",
    "null",
    "I don't know",
    "the answer",
    "?",
]
"""Answers that say nothing; no scorer may reward them."""


@dataclass(frozen=True)
class Probe:
    """One answer to try: its text and, for file-scored tasks, the episode's files."""

    label: str
    answer: str
    files: dict[str, bytes] | None = None


# ── numbers ──
def _wrong_number(gold: float) -> float:
    """A number no tolerance accepts for ``gold``, written plainly."""
    return round(gold + max(1000.0, abs(gold)) * 1.5 + 7, 2)


def _grouped(text: str, sep: str) -> str | None:
    """``text`` (a plain decimal) with its integer part in thousands groups, or None if short."""
    match = re.fullmatch(r"(-?)(\d+)(\.\d+)?", text)
    if not match or len(match.group(2)) < 4:
        return None
    digits = match.group(2)
    head = len(digits) % 3 or 3
    groups = [digits[:head]] + [digits[i : i + 3] for i in range(head, len(digits), 3)]
    return match.group(1) + sep.join(groups) + (match.group(3) or "")


def _same_number(text: str, gold: float) -> bool:
    try:
        return float(text) == gold
    except ValueError:
        return False


def numeric_probes(gold_text: str, gold: float) -> tuple[list[Probe], list[Probe]]:
    """(adversarial, natural) answers for a number task whose oracle says ``gold_text``."""
    w = f"{_wrong_number(gold):.2f}".rstrip("0").rstrip(".")
    adversarial = [
        Probe("either-or", f"Either {w} or {gold_text}"),
        Probe("or", f"{gold_text} or {w}"),
        Probe("pair", f"{w}, {gold_text}"),
        Probe("list", f"[{w}, {gold_text}, {w}1]"),
        Probe("range", f"{w} - {gold_text}"),
        Probe("between", f"Between {w} and {gold_text}"),
        Probe("maybe", f"maybe {gold_text}, maybe {w}"),
        Probe("slash", f"{gold_text}/{w}"),
        Probe("wrong", w),
        Probe("digits-run-together", gold_text.replace(".", "")),
    ]
    run_together = gold_text.replace(".", "")
    if "." not in gold_text or _same_number(run_together, gold):
        adversarial.pop()  # no decimal point to drop, or dropping it keeps the value ("0.0")
    natural = [
        Probe("plain", gold_text),
        Probe("sentence", f"The answer is {gold_text}."),
        Probe("bold", f"**{gold_text}**"),
        Probe("rounding-note", f"{gold_text} (rounded)"),
        Probe("date-beside", f"{gold_text} on 2022-12-31"),
        Probe("trailing-zero", gold_text + ("0" if "." in gold_text else ".0")),
    ]
    for label, sep in (
        ("commas", ","),
        ("space", " "),
        ("thin-space", "\u202f"),
        ("no-break-space", "\u00a0"),
    ):
        grouped = _grouped(gold_text, sep)
        if grouped:
            natural.append(Probe(label, grouped))
    return adversarial, natural


# ── text, sets, lists ──
def text_probes(gold: str) -> tuple[list[Probe], list[Probe]]:
    other = "Unknown" if gold.lower() != "unknown" else "Other"
    adversarial = [
        Probe("or", f"{gold} or {other}"),
        Probe("pair", f"{gold}, {other}"),
        Probe("wrong", other),
    ]
    if len(gold) >= 4:
        adversarial.append(Probe("prefix", gold[: len(gold) // 2]))
    natural = [
        Probe("quoted", f"'{gold}'."),
        Probe("bold", f"**{gold}**"),
        Probe("period", f"{gold}."),
        Probe("case", gold.upper()),
    ]
    return adversarial, natural


def collection_probes(items: list[str], ordered: bool) -> tuple[list[Probe], list[Probe]]:
    quoted = ", ".join(f'"{i}"' for i in items)
    adversarial = [
        Probe("superset", f'[{quoted}, "Other"]'),
        Probe("nested", f"[[{quoted}]]"),
        Probe("second-list", f'[{quoted}] ["Other"]'),
    ]
    if len(items) > 1:  # one item joined by spaces is that item, the correct answer
        adversarial.append(Probe("space-joined", " ".join(items)))
        adversarial.append(Probe("subset", "[" + ", ".join(f'"{i}"' for i in items[:-1]) + "]"))
        if ordered and items[::-1] != items:
            adversarial.append(
                Probe("reversed", "[" + ", ".join(f'"{i}"' for i in items[::-1]) + "]")
            )
    natural = [
        Probe("json", f"[{quoted}]"),
        Probe("lowercase", ", ".join(i.lower() for i in items)),
        Probe("numbered", "\n".join(f"{n}. {i}" for n, i in enumerate(items, 1))),
        Probe("in-prose", f"They are [{quoted}]."),
        Probe("with-note", f"[{quoted}] [note: as the question asks]"),
    ]
    if not ordered:
        natural.append(Probe("other-order", ", ".join(items[::-1])))
        natural.append(Probe("repeated", f'[{quoted}, "{items[0]}"]'))
    return adversarial, natural


def is_nan_text(value: Any) -> bool:
    """Whether a gold value is NaN (written ``nan``, ``NaN``...): then ``nan`` is its right answer.

    Example:
        >>> is_nan_text("NaN"), is_nan_text("0.5"), is_nan_text("n/a")
        (True, False, False)
    """
    try:
        return math.isnan(float(value))
    except (TypeError, ValueError):
        return False


def dabench_probes(parts: list[list[str]], oracle: str) -> tuple[list[Probe], list[Probe]]:
    wrong = " ".join(f"@{n}[-12345.678]" for n, _ in parts)
    adversarial = [
        Probe("wrong-then-right", f"{wrong} {oracle}"),
        Probe("right-then-wrong", f"{oracle} {wrong}"),
        Probe("no-format", " ".join(f"{n} {v}" for n, v in parts)),
    ]
    if not all(is_nan_text(v) for _, v in parts):  # NaN for a number; a NaN gold keeps its value
        nan = " ".join(f"@{n}[{v if is_nan_text(v) else 'nan'}]" for n, v in parts)
        adversarial.append(Probe("nan", nan))
    if len(parts) > 1:
        adversarial.append(Probe("missing-part", " ".join(oracle.split()[:-1])))
    natural = [
        Probe("plain", oracle),
        Probe("in-prose", f"Results: {oracle}."),
        Probe("agreeing-repeat", f"{oracle} {oracle}"),
    ]
    return adversarial, natural
