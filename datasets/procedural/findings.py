"""Open questions answered by a short written finding, scored by the ``rubric`` verifier.

A findings template asks two things at once (a change over time and the group
that leads) and wants them in a sentence or two. Its query op is
``("finding", growth_op, leader_op)``: both sub-queries are answered by both
engines like any other, and the gold becomes a rubric of checkable facts
(:mod:`analyst_env.verifiers.rubric`): the leading group named (and no rival),
the percentage within half a unit of its last decimal, the direction of change.
All three are checked deterministically, so the oracle scores 1.0 without a
judge; a task that adds ``judged`` facts needs a judge configured (fail closed).
"""

from __future__ import annotations

import re
from typing import Any

from analyst_env.task_format import VerifierSpec

FORMATS = (
    "Answer in one or two sentences: say whether the total rose or fell, by what percentage "
    "(rounded to 1 decimal place), and name the group.",
    "Write your finding in at most two sentences, giving the percentage change to 1 decimal "
    "place, its direction, and the group's name as the data writes it.",
)
MAX_CHARS = 600


def _whole_word_clash(a: str, b: str) -> bool:
    """Whether one label is a whole word inside the other ("North" in "North East")."""
    la, lb = a.lower(), b.lower()
    return any(
        re.search(rf"(?<!\w){re.escape(x)}(?!\w)", y) is not None for x, y in ((la, lb), (lb, la))
    )


def scored(gold: list[Any], labels: list[str], wording: int) -> tuple[str, dict, VerifierSpec, str]:
    """(oracle, rubric gold, verifier, format sentence) for a finding; ValueError names a drop."""
    growth, leader = float(gold[0]), str(gold[1])
    rounded = round(abs(growth), 1)
    if rounded < 0.1 or abs(abs(growth) * 10 - int(abs(growth) * 10) - 0.5) < 1e-6:
        raise ValueError("rounding-boundary")
    rivals = sorted({label for label in labels if label != leader})
    if any(_whole_word_clash(leader, r) for r in rivals) or re.search(r"\d", leader):
        raise ValueError("ambiguous-label")
    direction = "down" if growth < 0 else "up"
    verb = "fell" if growth < 0 else "rose"
    oracle = f"The monthly total {verb} by {rounded:.1f}%, and {leader} has the highest total."
    answer = {
        "finding": oracle,
        "facts": [
            {"kind": "entity", "value": leader, "others": rivals},
            {"kind": "number", "value": rounded, "tol": 0.05 + 1e-9, "absolute": True},
            {"kind": "direction", "value": direction},
        ],
    }
    verifier = VerifierSpec(name="rubric", params={"max_chars": MAX_CHARS})
    return oracle, answer, verifier, FORMATS[wording % len(FORMATS)]
