"""The question of one procedural attempt: the template's ask, the composed filters and the words.

Drawn from a ``Ctx`` (the clean records and a random generator), so the same
data can be asked a second question when the first one fails its checks
(``generator``): its answer undefined or spelled out by the question itself.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from analyst_env.datasets.procedural import files
from analyst_env.datasets.procedural.attempt_draw import Drawn
from analyst_env.datasets.procedural.composition import compose_filters
from analyst_env.datasets.procedural.defect_notes import defect_notes
from analyst_env.datasets.procedural.dropped import Dropped
from analyst_env.datasets.procedural.phrasing import reword_question
from analyst_env.datasets.procedural.query import uses_attr
from analyst_env.datasets.procedural.templates import Ask, Ctx

BOOK_STYLES = ("workbook", "column")
"""Answer styles scored on a workbook the agent saves (``books``), not on its words."""
SAVED_STYLES = (*BOOK_STYLES, "chart")
"""Answer styles scored on a file the agent saves: asked in a sentence, never reworded."""


@dataclass
class Question:
    """One question about an attempt's data, before its answer is known."""

    ctx: Ctx
    ask: Ask
    query: dict
    text: str  # the question sentence
    head: str  # the question, where the data is and the defects to repair
    depth: int
    wording: random.Random  # the answer-format sentence is drawn from its state ``answer_format``
    answer_format: Any


def draw_question(
    ctx: Ctx, drawn: Drawn, place: files.Placement, wording: random.Random
) -> Question:
    """The template's question with its composed filters, worded; Dropped if the data does not
    suit the template or the question needs a lookup table the layout lacks."""
    t, d = drawn.template, drawn.domain
    ask = t.fn(ctx)
    if ask is None:
        raise Dropped("template-unsuited")
    has_dim = place.dim_file is not None
    filters, words, extra_ops = compose_filters(ctx, t, ask, drawn.n_extra, has_dim)
    query = {"filters": filters, "op": ask.op}
    if uses_attr(query) and not has_dim:
        raise Dropped("no-lookup-table")
    question = ask.question + (
        f", counting only the {ctx.entity_plural()} " + " and ".join(words) if words else ""
    )
    question += "." if ask.style in SAVED_STYLES else "?"
    if ask.style not in SAVED_STYLES:
        question = reword_question(question, wording)
    answer_format = wording.getstate()
    notes = " ".join(defect_notes(d, drawn.mess, has_dim and uses_attr(query)))
    if ask.style == "column":  # an edit of the file as written: no repair to do, none to state
        notes = ""
    head = f"{question}\n\n{files.describe(place)}" + (f" {notes}" if notes else "")
    depth = min(t.depth + extra_ops, 6)
    return Question(ctx, ask, query, question, head, depth, wording, answer_format)
