"""One procedural task from ``(deployment seed, split, index)``: files written, answer found twice.

:func:`attempt` draws a template, a domain, a file layout, defects and a row
count; composes the template with extra filters (each one more operation the
answer depends on); writes the files; reads them back through pandas and
through the standard library; and keeps the task only if both readings give
the same, unambiguous answer that neither the question nor the file previews
state. A draw that fails any check is dropped (the reason is counted) and the
next attempt of the same index is drawn, so every index still names one task.

The parts live beside it: the draw in ``attempt_draw``, the added filters in
``composition``, the defect sentences in ``defect_notes``, the checks that the
answer is not already shown in ``answer_leaks``, workbook answers in ``books``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analyst_env.datasets.procedural import (
    books,
    charts,
    engine_pandas,
    engine_plain,
    files,
    findings,
    solution_plan,
)
from analyst_env.datasets.procedural.answer_leaks import in_previews, in_shared_text
from analyst_env.datasets.procedural.attempt_draw import Drawn, draw_attempt
from analyst_env.datasets.procedural.composition import compose_filters
from analyst_env.datasets.procedural.defect_notes import defect_notes
from analyst_env.datasets.procedural.domain_schema import Domain
from analyst_env.datasets.procedural.draft import Draft, leaks, oracle_and_verifier
from analyst_env.datasets.procedural.phrasing import format_request, reword_question, wording_rng
from analyst_env.datasets.procedural.query import agree, uses_attr
from analyst_env.datasets.procedural.splits import global_number
from analyst_env.datasets.procedural.tables import Mess, apply_mess, draw
from analyst_env.datasets.procedural.templates import Ask, Ctx
from analyst_env.task_format import Task

GENERATOR_VERSION = 10  # 10: the plan records a saved answer's sheet or chart (solutions)
# 9: charts saved as SVG, verified from the figure (charts, chart_figure)
# 8: open questions answered by a written finding (findings, rubric)
# 6: questions and answer formats worded several ways (phrasing.py)
# 5: articles and plurals from inflect ("stays", "an `agent_id`")
NAME = "procedural"
LEVELS = {1: "easy", 2: "easy", 3: "medium"}  # depth 4 and more: hard


class Dropped(Exception):
    """A drawn task failed a check; ``reason`` is the counted cause."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def level_of(depth: int) -> str:
    return LEVELS.get(depth, "hard")


def _records(truth_fact: pd.DataFrame, truth_dim: pd.DataFrame, d: Domain) -> pd.DataFrame:
    """The clean truth by role, for templates to draw parameters from."""
    out = pd.DataFrame(
        {
            "id": truth_fact[d.id_col].astype(str),
            "date": pd.to_datetime(truth_fact[d.date_col], format="%Y-%m-%d"),
            "g1": truth_fact[d.g1[0]],
            "g2": truth_fact[d.g2[0]],
            "key": truth_fact[d.key],
            "m1": truth_fact[d.m1.name].astype(float),
            "m2": truth_fact[d.m2.name].astype(float),
        }
    )
    out["attr"] = out["key"].map(dict(zip(truth_dim[d.key], truth_dim[d.attr[0]])))
    return out


def _answer(q: dict, fact: Any, dim: Any, d: Domain, mess: Mess, engine: Any) -> Any:
    """The answer to ``q`` by one engine, from the tables as that engine read them.

    A finding's sub-queries share one preparation of the records (evaluating never
    changes them), so a finding costs one reading of the tables, not one per sub-query.
    """
    subs = q["op"][1:] if q["op"][0] == "finding" else [q["op"]]
    records = None
    answers = []
    for op in subs:
        if op[0] == "raw":  # about the file as written: duplicate rows, unknown keys
            answers.append(engine.raw_facts(fact, dim, d).get(op[1]))
            continue
        if records is None:
            records = engine.prepare(fact, dim, d, mess)
        answers.append(engine.evaluate({**q, "op": op}, records))
    return answers if q["op"][0] == "finding" else answers[0]


def _near_half(value: float, decimals: int) -> bool:
    scaled = abs(value) * 10**decimals
    return abs(scaled - math.floor(scaled) - 0.5) < 1e-6


def _draft(ask: Ask, gold: Any, question: str, level: str, d: Domain) -> Draft:
    if ask.style == "number":
        if not math.isfinite(gold) or _near_half(gold, ask.decimals):
            raise Dropped("rounding-boundary")
        return Draft(
            question, round(float(gold), ask.decimals), "number", level, decimals=ask.decimals
        )
    if ask.style == "integer":
        return Draft(question, int(gold), "integer", level)
    if ask.style == "text":
        return Draft(question, str(gold), "text", level, what=ask.what)
    if ask.style in ("set", "list"):
        return Draft(
            question, [str(v) for v in gold], ask.style, level, what=ask.what, order=ask.order
        )
    a, b = str(gold).split("|", 1)
    names = (d.g1[0], d.g2[0])
    return Draft(
        question,
        [(names[0], a), (names[1], b)],
        "parts",
        level,
        what=f"the row's `{names[0]}` and the column's `{names[1]}` written exactly as in the data",
    )


def attempt(
    seed: int, split: str, index: int, tries: int, directory: Path, only: str | None = None
) -> Task:
    """One attempt at task ``index`` of ``split``; files go into ``directory`` (existing, empty).

    ``only`` restricts the draw to one template (for checking a template on its own).
    """
    number = global_number(split, index)
    rng = np.random.default_rng([seed, number, tries])
    drawn = draw_attempt(rng, split, only)
    t, d = drawn.template, drawn.domain
    truth = draw(d, rng, drawn.rows)
    ctx = Ctx(d, _records(truth.fact, truth.dim, d), rng)
    ask = t.fn(ctx)
    if ask is None:
        raise Dropped("template-unsuited")
    place = files.placement(d, drawn.layout)
    has_dim = place.dim_file is not None
    filters, words, extra_ops = compose_filters(ctx, t, ask, drawn.n_extra, has_dim)
    depth = min(t.depth + extra_ops, 6)
    query = {"filters": filters, "op": ask.op}
    if uses_attr(query) and not has_dim:
        raise Dropped("no-lookup-table")
    question = ask.question + (
        f", counting only the {ctx.entity_plural()} " + " and ".join(words) if words else ""
    )
    question += "." if ask.style in SAVED_STYLES else "?"
    wording = wording_rng(seed, split, index, tries)
    if ask.style not in SAVED_STYLES:
        question = reword_question(question, wording)
    answer_format = wording.getstate()
    notes = " ".join(defect_notes(d, drawn.mess, has_dim and uses_attr(query)))
    if ask.style == "column":  # an edit of the file as written: no repair to do, none to state
        notes = ""
    describe = f"{question}\n\n{files.describe(place)}" + (f" {notes}" if notes else "")
    fact, dim = apply_mess(truth, drawn.mess, rng)
    solution_plan.write(directory, solution_plan.make(t, d, ask, query, place, drawn.mess))
    made = Made(split, index, drawn, depth, int(len(fact)))
    if ask.style in BOOK_STYLES:
        try:
            return _book_task(made, ask, query, describe, place, fact, dim, directory)
        except books.Unscorable as exc:
            raise Dropped(exc.reason) from None
    if ask.style == "chart":
        return _chart_task(made, ask, query, describe, place, (fact, dim), directory, ctx)

    def worded(gold: Any) -> tuple[Draft, str, tuple]:
        """The draft, the instruction and the (oracle, answer, verifier) for ``gold``; Dropped
        if they cannot be fair."""
        if gold is None or (isinstance(gold, (list, str)) and not gold):
            raise Dropped("undefined-answer")
        if ask.style == "finding":
            return _finding(gold, question, describe, ctx, wording)
        draft = _draft(ask, gold, question, level_of(depth), d)
        wording.setstate(answer_format)  # the same sentence however often the gold is worded
        instruction = f"{describe}\n\n{format_request(draft, wording)}"
        scored = oracle_and_verifier(draft)
        if leaks(instruction, scored[0], draft.style):
            raise Dropped("answer-in-question")
        return draft, instruction, scored

    if files.has_workbook(drawn.layout):
        # A screen on the tables before they are written: most drops are decided here,
        # without paying for a workbook. A CSV or SQLite file costs less than the screen's
        # pandas answer, so there the drop is found on the gold itself. The gold always
        # comes from the files as written, read back below.
        worded(_answer(query, fact, dim, d, drawn.mess, engine_pandas))
    paths = files.write(place, fact, dim, directory)
    pd_fact, pd_dim = files.read_pandas(place, directory)
    gold = _answer(query, pd_fact, pd_dim, d, drawn.mess, engine_pandas)
    draft, instruction, (oracle, answer, verifier) = worded(gold)
    pl_fact, pl_dim = files.read_plain(place, directory)
    check = _answer(query, pl_fact, pl_dim, d, drawn.mess, engine_plain)
    if not agree(gold, check):
        raise Dropped("engines-disagree")
    if in_previews(paths, oracle, draft.style):
        raise Dropped("answer-in-preview")
    shown = gold[1] if draft.style == "finding" else answer  # a finding's label: the leader
    if draft.style in ("text", "set", "list", "parts", "finding") and in_shared_text(shown):
        raise Dropped("answer-in-shared-text")
    return made.task(instruction, paths, answer, oracle, verifier)


def _finding(gold: Any, question: str, describe: str, ctx: Ctx, wording: Any) -> tuple:
    """A findings task's draft stand-in, instruction and (oracle, rubric gold, verifier)."""
    if gold is None or any(g is None for g in gold):
        raise Dropped("undefined-answer")
    labels = sorted(set(ctx.records["g1"].dropna().astype(str)))
    try:
        oracle, answer, verifier, request = findings.scored(gold, labels, wording.randrange(9))
    except ValueError as exc:
        raise Dropped(str(exc)) from None
    draft = Draft(question, answer, "finding", "")
    instruction = f"{describe}\n\n{request}"
    if gold[1].lower() in instruction.lower():
        raise Dropped("answer-in-question")
    return draft, instruction, (oracle, answer, verifier)


BOOK_STYLES = ("workbook", "column")
"""Answer styles scored on a workbook the agent saves (``books``), not on its words."""
SAVED_STYLES = (*BOOK_STYLES, "chart")
"""Answer styles scored on a file the agent saves: asked in a sentence, never reworded."""


@dataclass
class Made:
    """What every task of an attempt records, whatever its answer style."""

    split: str
    index: int
    drawn: Drawn
    depth: int
    rows: int

    def task(
        self,
        instruction: str,
        paths: dict[str, str],
        answer: Any,
        oracle: str,
        verifier: Any,
        oracle_steps: list | None = None,
        **extra: Any,
    ) -> Task:
        t, d = self.drawn.template, self.drawn.domain
        return Task(
            id=f"{NAME}-{self.split}-{self.index}",
            instruction=instruction,
            files=paths,
            answer=answer,
            oracle_answer=oracle,
            oracle_steps=oracle_steps or [],
            verifier=verifier,
            split=self.split,
            metadata={
                "source": NAME,
                "dataset": NAME,
                "index": self.index,
                "category": t.category,
                "family": t.family,
                "template": t.name,
                "domain": d.name,
                "level": level_of(self.depth),
                "depth": self.depth,
                "kind": files.KIND_OF_LAYOUT[self.drawn.layout],
                "layout": self.drawn.layout,
                "defects": self.drawn.mess.names(),
                "rows": self.rows,
                "generator_version": GENERATOR_VERSION,
                **extra,
            },
        )


def _book_task(
    made: Made,
    ask: Ask,
    query: dict,
    head: str,
    place: files.Placement,
    fact: pd.DataFrame,
    dim: pd.DataFrame | None,
    directory: Path,
) -> Task:
    """A task answered by a saved workbook: the sheet's table (or column) found by both engines
    from the files as written, then the reference, instruction and oracle (``books``)."""
    d, mess, level = made.drawn.domain, made.drawn.mess, level_of(made.depth)
    if ask.style != "column":
        books.screen(ask, _answer(query, fact, dim, d, mess, engine_pandas), level)
    paths = files.write(place, fact, dim, directory)
    pd_fact, pd_dim = files.read_pandas(place, directory)
    pl_fact, pl_dim = files.read_plain(place, directory)
    if ask.style != "column" or dim is None or pd_dim is None or pl_dim is None:
        table = _answer(query, pd_fact, pd_dim, d, mess, engine_pandas)
        if table is None:
            raise Dropped("undefined-answer")
        if not agree(table, _answer(query, pl_fact, pl_dim, d, mess, engine_plain)):
            raise Dropped("engines-disagree")
        book = books.sheet_book(ask, table, level, head, place, fact, dim, directory)
    else:
        looked_up = engine_pandas.lookup_column(pd_fact, pd_dim, d)
        cells = engine_plain.lookup_column(pl_fact, pl_dim, d)  # as the lookup sheet stores them
        if all(v is None for v in looked_up):
            raise Dropped("undefined-answer")
        if looked_up != [None if v is None else str(v) for v in cells]:
            raise Dropped("engines-disagree")
        book = books.column_book(cells, head, d, place, fact, dim, directory)
    return made.task(
        book.instruction,
        paths,
        book.answer,
        "done",
        books.VERIFIER,
        book.oracle_steps,
        output=book.output,
    )


def _chart_task(
    made: Made,
    ask: Ask,
    query: dict,
    head: str,
    place: files.Placement,
    tables: tuple[pd.DataFrame, pd.DataFrame | None],
    directory: Path,
    ctx: Ctx,
) -> Task:
    """A task answered by a saved figure: the series found by both engines from the files as
    written, then the gold, request and oracle cell (``charts``)."""
    d, mess = made.drawn.domain, made.drawn.mess
    paths = files.write(place, *tables, directory)
    series = _answer(query, *files.read_pandas(place, directory), d, mess, engine_pandas)
    check = _answer(query, *files.read_plain(place, directory), d, mess, engine_plain)
    if series is None:
        raise Dropped("undefined-answer")
    if not agree(series, check):
        raise Dropped("engines-disagree")
    try:
        fig = charts.figure(ask, series, ctx)
    except ValueError as exc:
        raise Dropped(str(exc)) from None
    instruction = f"{head}\n\n{fig.request}"
    return made.task(instruction, paths, fig.answer, "done", charts.VERIFIER, fig.oracle_steps)
