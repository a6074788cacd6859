"""Several ways to word one generated question and its answer format, as different people would.

A template writes its question one way ("How many orders have ..."), and every task of
that template used to read the same, with the same closing sentence about the format. A
model trained on that learns the template, not the request. Here a task's wording is
drawn from a few equivalent forms: the question as asked, as an imperative ("Count the
orders that have ..."), or as a request with a short lead ("From the data, ..."), and
the answer format stated in one of several ways that ask for exactly the same thing (the
scorer is unchanged, so every form must fix the same answer).

Every rewrite is a whole-sentence pattern with its meaning spelt out; a question no
pattern fits keeps its own words. The draw uses a generator of its own, seeded by the
task's place, so wording never shifts the data or the answer a seed makes.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

from analyst_env.datasets.procedural.draft import Draft

__all__ = ["format_request", "reword_question", "wording_rng"]

Rewrite = Callable[[re.Match[str]], str]

QUESTION_FORMS: list[tuple[re.Pattern[str], list[Rewrite]]] = [
    (
        re.compile(r"^How many (?P<things>.+?) (?P<verb>have|are) (?P<rest>.+)\?$"),
        [
            lambda m: m.group(0),
            lambda m: f"Count the {m['things']} that {m['verb']} {m['rest']}.",
            lambda m: f"What is the number of {m['things']} that {m['verb']} {m['rest']}?",
            lambda m: f"Find out how many {m['things']} {m['verb']} {m['rest']}.",
        ],
    ),
    (
        re.compile(r"^What is the (?P<rest>.+)\?$"),
        [
            lambda m: m.group(0),
            lambda m: f"Compute the {m['rest']}.",
            lambda m: f"Find the {m['rest']}.",
            lambda m: f"I need the {m['rest']}.",
        ],
    ),
    (
        re.compile(r"^Which (?P<things>.+?) (?P<verb>has|have) (?P<rest>.+)\?$"),
        [
            lambda m: m.group(0),
            lambda m: f"Find the {m['things']} that {m['verb']} {m['rest']}.",
            lambda m: f"Name the {m['things']} that {m['verb']} {m['rest']}.",
        ],
    ),
]
"""Whole-question patterns and the forms each may take (the first is the question as written)."""

LEADS = [
    "",
    "",
    "",
    "",
    "From the data, ",
    "Using the files below, ",
    "Looking at the data, ",
    "Based on the files provided, ",
    "For a short report on these records, ",
    "As a quick check of the data before anything else, ",
]
"""Short leads before a question that starts with a wh-word (the empty lead most often)."""

LEAD_WORDS = ("How ", "What ", "Which ")

IMPERATIVE_END = re.compile(r"(?:^|, )(?:rank|list|sort|name|find|count|compute) [^?]*\?$", re.I)
"""A last sentence that gives an order ("..., rank the values by total") ends in a full stop."""


REQUEST_FORMS: dict[str, tuple[str, ...]] = {
    "number": (
        "Give your final answer as a single number rounded to {places}, without units.",
        "Round the result to {places} and answer with the number alone, without units.",
        "Answer with one number rounded to {places} (no units).",
        "Report it as a plain number to {places}, with no units.",
    ),
    "integer": (
        "Give your final answer as a single integer.",
        "Answer with a whole number only.",
        "Reply with just the integer.",
    ),
    "text": (
        "Give your final answer as the {what} only, written exactly as in the data.",
        "Answer with the {what} alone, exactly as the data writes it.",
        "Reply with just the {what}, spelt as it appears in the data.",
    ),
    "set": (
        'Give your final answer as a JSON list of {what} (e.g. ["x", "y"]); order does not matter.',
        'Answer with a JSON list of {what} in any order (e.g. ["x", "y"]).',
        'List the {what} as a JSON array, e.g. ["x", "y"]; any order is fine.',
    ),
    "list": (
        "Give your final answer as a JSON list of {what}, {order}.",
        "Answer with a JSON list of {what}, {order}.",
        "Reply with the {what} as a JSON list, {order}.",
    ),
    "parts": (
        "Your final answer must contain {layout}, with {what}.",
        "Write your final answer as {layout}, with {what}.",
    ),
}
"""The answer-format sentences of each draft style, every one asking for exactly the same
answer; ``{what}``, ``{order}``, ``{places}`` (``number``: "2 decimal places") and ``{layout}``
(``parts``: "@name[value] ...") are the draft's."""


def wording_rng(seed: int, split: str, index: int, tries: int) -> random.Random:
    """The generator a task's wording is drawn from: its own, so the data draws never shift."""
    return random.Random(f"wording:{seed}:{split}:{index}:{tries}")


def reword_question(question: str, rng: random.Random) -> str:
    """``question`` in one of its equivalent forms, or as written when no pattern fits it."""
    for pattern, forms in QUESTION_FORMS:
        match = pattern.match(question)
        if match:
            question = rng.choice(forms)(match)
            break
    last = question.rsplit(". ", 1)[-1]
    if IMPERATIVE_END.search(last) and not re.search(r"\b(?:which|what|how)\b", last, re.I):
        question = question[:-1] + "."
    lead = rng.choice(LEADS)
    if lead and question.startswith(LEAD_WORDS):
        question = lead + question[0].lower() + question[1:]
    return question


def format_request(draft: Draft, rng: random.Random) -> str:
    """The sentence that says how to write the answer, in one of several equivalent wordings."""
    d = draft
    if d.style not in REQUEST_FORMS:
        raise ValueError(f"unknown draft style {d.style!r}")
    places = f"{d.decimals} decimal place" + ("" if d.decimals == 1 else "s")
    layout = " ".join(f"@{n}[value]" for n, _ in d.answer) if d.style == "parts" else ""
    return rng.choice(REQUEST_FORMS[d.style]).format(
        what=d.what, order=d.order, places=places, layout=layout
    )
