"""One procedural task from ``(deployment seed, split, index)``: files written, answer found twice.

:func:`attempt` draws a template, a domain, a file layout, defects and a row
count; composes the template with extra filters (each one more operation the
answer depends on); writes the files; reads them back through pandas and
through the standard library; and keeps the task only if both readings give
the same, unambiguous answer that neither the question nor the file previews
state. A question that fails a check (its answer undefined, or spelled out by
the question) is drawn again on the same files, a few times; a draw that still
fails, or whose two readings disagree, is dropped (the reason is counted) and
the next attempt of the same index is drawn, so every index still names one task.

The parts live beside it: the draw in ``attempt_draw``, the question and its
added filters in ``question`` and ``composition``, the two readings of the
files in ``readings``, the defect sentences in ``defect_notes``, the checks that
the answer is not already shown in ``answer_leaks``, workbook answers in ``books``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
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
from analyst_env.datasets.procedural.domain_schema import Domain
from analyst_env.datasets.procedural.draft import Draft, leaks, oracle_and_verifier
from analyst_env.datasets.procedural.dropped import Dropped
from analyst_env.datasets.procedural.phrasing import format_request, wording_rng
from analyst_env.datasets.procedural.query import agree
from analyst_env.datasets.procedural.question import BOOK_STYLES, Question, draw_question
from analyst_env.datasets.procedural.readings import Reading, Written, operations
from analyst_env.datasets.procedural.splits import global_number
from analyst_env.datasets.procedural.tables import apply_mess, draw
from analyst_env.datasets.procedural.templates import Ask, Ctx
from analyst_env.task_format import Task

GENERATOR_VERSION = 12  # 12: set differences on small tables, cohorts that exist, labels screened
# 11: a failed question is drawn again on the same files (question.py)
# 10: the plan records a saved answer's sheet or chart (solutions)
# 9: charts saved as SVG, verified from the figure (charts, chart_figure)
# 8: open questions answered by a written finding (findings, rubric)
# 6: questions and answer formats worded several ways (phrasing.py)
# 5: articles and plurals from inflect ("stays", "an `agent_id`")
NAME = "procedural"
LEVELS = {1: "easy", 2: "easy", 3: "medium"}  # depth 4 and more: hard


def level_of(depth: int) -> str:
    return LEVELS.get(depth, "hard")


def _records(truth_fact: pd.DataFrame, truth_dim: pd.DataFrame, d: Domain) -> pd.DataFrame:
    """The clean truth by role, for templates to draw parameters from; text stays Python
    strings (object dtype), as ``tables.draw`` makes it, because templates read it cell by cell."""
    out = pd.DataFrame(
        {
            "id": pd.Series([str(v) for v in truth_fact[d.id_col]], dtype=object),
            "date": pd.to_datetime(truth_fact[d.date_col], format="%Y-%m-%d"),
            "g1": truth_fact[d.g1[0]],
            "g2": truth_fact[d.g2[0]],
            "key": truth_fact[d.key],
            "m1": truth_fact[d.m1.name].astype(float),
            "m2": truth_fact[d.m2.name].astype(float),
        }
    )
    lookup = dict(zip(truth_dim[d.key], truth_dim[d.attr[0]]))
    out["attr"] = pd.Series([lookup.get(k, np.nan) for k in out["key"]], dtype=object)
    return out


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


QUESTION_TRIES = 4
"""Questions asked of one attempt's data before the whole attempt is drawn again."""
FINAL_REASONS = frozenset({"engines-disagree"})
"""Drops that condemn the data itself (the two readings differ), not only its question."""


def attempt(
    seed: int,
    split: str,
    index: int,
    tries: int,
    directory: Path,
    only: str | None = None,
    redrawn: Callable[[str], None] | None = None,
) -> Task:
    """One attempt at task ``index`` of ``split``; files go into ``directory`` (existing, empty).

    The files are written once; a question that fails its checks (its answer undefined,
    spelled out by the question, on a rounding boundary...) is drawn again on the same
    files, up to ``QUESTION_TRIES`` questions, each redraw reported to ``redrawn`` with
    its reason. ``only`` restricts the draw to one template (for checking a template on
    its own).
    """
    number = global_number(split, index)
    rng = np.random.default_rng([seed, number, tries])
    drawn = draw_attempt(rng, split, only)
    d = drawn.domain
    truth = draw(d, rng, drawn.rows)
    records = _records(truth.fact, truth.dim, d)
    place = files.placement(d, drawn.layout)

    def question(q_rng: np.random.Generator) -> Question | Dropped:
        wording = wording_rng(seed, split, index, tries)
        try:
            return draw_question(Ctx(d, records, q_rng), drawn, place, wording)
        except Dropped as exc:
            return exc

    first = question(rng)  # from the attempt's generator, before the defects are drawn
    clean = None if drawn.template.needs else Reading.of_records(engine_pandas, records)
    written = None  # the tables with their defects, as files, and their readings: made once
    failure, asked = None, set()
    for k in range(QUESTION_TRIES):
        q = first if k == 0 else question(np.random.default_rng([seed, number, tries, k]))
        if isinstance(q, Question):
            if repr(q.query) in asked:  # the data allows no other question: the same failure
                break
            asked.add(repr(q.query))
        if failure is not None and redrawn is not None:
            redrawn(failure.reason)
        try:
            if isinstance(q, Dropped):
                raise q
            if clean is not None:
                _screen(q, clean, d)
            if written is None:  # the defects draw from the attempt's generator after `first`
                tables = apply_mess(truth, drawn.mess, rng)
                written = Written(place, directory, tables, d, drawn.mess)
            made = Made(split, index, drawn, q.depth, int(len(written.tables[0])))
            task = _task(made, q, written)
        except Dropped as exc:
            failure = exc
            column = isinstance(q, Question) and q.ask.style == "column"  # asks nothing else
            if exc.reason in FINAL_REASONS or column:
                break
            continue
        solution_plan.write(
            directory, solution_plan.make(drawn.template, d, q.ask, q.query, place, drawn.mess)
        )
        return task
    assert failure is not None
    raise failure


def _screen(q: Question, clean: Reading, d: Domain) -> None:
    """Raise Dropped if the question's answer on the clean tables already fails a check.

    Writing and reading the files back costs more than this, so a question that fails
    here is drawn again before any file is written. The gold is never taken from here:
    a question that passes is asked of the files as written, with every check. Questions
    about the defects themselves are not screened (the clean tables have none).
    """
    ask = q.ask
    if ask.style == "column" or any(op[0] == "raw" for op in operations(q.query)):
        return
    answer = clean.answer(q.query)
    if ask.style == "workbook":
        try:
            books.screen(ask, answer, level_of(q.depth))
        except books.Unscorable as exc:
            raise Dropped(exc.reason) from None
    elif ask.style == "chart":
        if answer is None:
            raise Dropped("undefined-answer")
    else:
        _worded(q, answer, d)


def _worded(q: Question, gold: Any, d: Domain) -> tuple[Draft, str, tuple]:
    """The draft, the instruction and the (oracle, answer, verifier) for ``gold``; Dropped if
    they cannot be fair (no answer, a rounding boundary, the answer in the question or in
    what every episode shows). The screen asks this of the clean tables too, so a label
    answer that every episode shows is redrawn before any file is written."""
    if gold is None or (isinstance(gold, (list, str)) and not gold):
        raise Dropped("undefined-answer")
    q.wording.setstate(q.answer_format)  # the same sentence however often it is worded
    if q.ask.style == "finding":
        draft, instruction, scored = _finding(gold, q)
    else:
        draft = _draft(q.ask, gold, q.text, level_of(q.depth), d)
        instruction = f"{q.head}\n\n{format_request(draft, q.wording)}"
        scored = oracle_and_verifier(draft)
        if leaks(instruction, scored[0], draft.style):
            raise Dropped("answer-in-question")
    shown = gold[1] if draft.style == "finding" else scored[1]  # a finding's label: the leader
    if draft.style in ("text", "set", "list", "parts", "finding") and in_shared_text(shown):
        raise Dropped("answer-in-shared-text")
    return draft, instruction, scored


def _task(made: Made, q: Question, written: Written) -> Task:
    """The task asking ``q`` of the written files; Dropped if it cannot be fair."""
    if q.ask.style in BOOK_STYLES:
        try:
            return _book_task(made, q, written)
        except books.Unscorable as exc:
            raise Dropped(exc.reason) from None
    if q.ask.style == "chart":
        return _chart_task(made, q, written)
    gold = written.pandas.answer(q.query)
    draft, instruction, (oracle, answer, verifier) = _worded(q, gold, made.drawn.domain)
    if not agree(gold, written.plain.answer(q.query)):
        raise Dropped("engines-disagree")
    if in_previews(written.paths, oracle, draft.style):
        raise Dropped("answer-in-preview")
    return made.task(instruction, written.paths, answer, oracle, verifier)


def _finding(gold: Any, q: Question) -> tuple:
    """A findings task's draft stand-in, instruction and (oracle, rubric gold, verifier)."""
    if any(g is None for g in gold):
        raise Dropped("undefined-answer")
    labels = sorted(set(q.ctx.records["g1"].dropna().astype(str)))
    try:
        oracle, answer, verifier, request = findings.scored(gold, labels, q.wording.randrange(9))
    except ValueError as exc:
        raise Dropped(str(exc)) from None
    draft = Draft(q.text, answer, "finding", "")
    instruction = f"{q.head}\n\n{request}"
    if gold[1].lower() in instruction.lower():
        raise Dropped("answer-in-question")
    return draft, instruction, (oracle, answer, verifier)


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


def _book_task(made: Made, q: Question, written: Written) -> Task:
    """A task answered by a saved workbook: the sheet's table (or column) found by both engines
    from the files as written, then the reference, instruction and oracle (``books``)."""
    d, level, (fact, dim) = made.drawn.domain, level_of(made.depth), written.tables
    pd_read, pl_read = written.pandas, written.plain
    place, directory = written.place, written.directory
    if q.ask.style != "column" or dim is None or pd_read.dim is None or pl_read.dim is None:
        table = pd_read.answer(q.query)
        if table is None:
            raise Dropped("undefined-answer")
        if not agree(table, pl_read.answer(q.query)):
            raise Dropped("engines-disagree")
        book = books.sheet_book(q.ask, table, level, q.head, place, fact, dim, directory)
    else:
        looked_up = engine_pandas.lookup_column(pd_read.fact, pd_read.dim, d)
        cells = engine_plain.lookup_column(pl_read.fact, pl_read.dim, d)  # as the sheet stores them
        if all(v is None for v in looked_up):
            raise Dropped("undefined-answer")
        if looked_up != [None if v is None else str(v) for v in cells]:
            raise Dropped("engines-disagree")
        book = books.column_book(cells, q.head, d, place, fact, dim, directory)
    return made.task(
        book.instruction,
        written.paths,
        book.answer,
        "done",
        books.VERIFIER,
        book.oracle_steps,
        output=book.output,
    )


def _chart_task(made: Made, q: Question, written: Written) -> Task:
    """A task answered by a saved figure: the series found by both engines from the files as
    written, then the gold, request and oracle cell (``charts``)."""
    series = written.pandas.answer(q.query)
    check = written.plain.answer(q.query)
    if series is None:
        raise Dropped("undefined-answer")
    if not agree(series, check):
        raise Dropped("engines-disagree")
    try:
        fig = charts.figure(q.ask, series, q.ctx)
    except ValueError as exc:
        raise Dropped(str(exc)) from None
    instruction = f"{q.head}\n\n{fig.request}"
    return made.task(
        instruction, written.paths, fig.answer, "done", charts.VERIFIER, fig.oracle_steps
    )
