"""One procedural task from ``(deployment seed, split, index)``: files written, answer found twice.

:func:`make_task` draws a template, a domain, a file layout, defects and a row
count; composes the template with extra filters (each one more operation the
answer depends on); writes the files; reads them back through pandas and
through the standard library; and keeps the task only if both readings give
the same, unambiguous answer that neither the question nor the file previews
state. A draw that fails any check is dropped (the reason is counted) and the
next attempt of the same index is drawn, so every index still names one task.
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analyst_env.datasets.preview import describe_file
from analyst_env.datasets.procedural import books, engine_pandas, engine_plain, files
from analyst_env.datasets.procedural.domain_schema import Domain
from analyst_env.datasets.procedural.grammar import article
from analyst_env.datasets.procedural.query import agree, uses_attr
from analyst_env.datasets.procedural.splits import global_number, pools
from analyst_env.datasets.procedural.tables import ALT_UNITS, Mess, apply_mess, draw, unit_col
from analyst_env.datasets.procedural.templates import Ask, Ctx, Template, fmt_value, load_all
from analyst_env.datasets.shipped.draft import Draft, format_sentence, leaks, oracle_and_verifier
from analyst_env.task_format import Task

GENERATOR_VERSION = 5  # 5: articles and plurals from inflect ("stays", "an `agent_id`")
NAME = "procedural"
LEVELS = {1: "easy", 2: "easy", 3: "medium"}  # depth 4 and more: hard
TARGET_DEPTHS = (1, 2, 3, 4, 5)
"""Composition adds filters until a task's depth reaches a target drawn from these."""
DEFECT_RATE = 0.25
EXCEL_MAX_ROWS = 120
MAX_ROWS = 2000
MIN_ROWS = 40


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


def _extra_filter(c: Ctx, kind: str) -> tuple[tuple, str] | None:
    """One composed filter and its words."""
    if kind in ("g1", "g2"):
        v = c.pick(kind)
        return (kind, "eq", v), f"whose {c.col(kind)} is {v}"
    if kind == "m2":
        t = c.threshold("m2")
        return ("m2", "gt", t), f"with {c.col('m2')} greater than {fmt_value(t)}"
    if kind == "year":
        years = c.records["date"].dt.year.value_counts()
        if len(years) < 2:
            return None
        y = int(years.index[0])
        return ("date", "year", y), f"dated in {y}"
    if kind == "attr":
        v = c.pick("attr")
        return (
            "attr",
            "eq",
            v,
        ), f"whose {c.col('key')} has {c.col('attr')} {v} in the lookup table"
    raise ValueError(kind)


def _compose(
    c: Ctx, t: Template, ask: Ask, n_extra: int, has_dim: bool
) -> tuple[list, list[str], int]:
    """Add up to ``n_extra`` filters on roles the template does not use; return filters, words,
    ops added."""
    if not t.composable:
        return list(ask.filters), [], 0
    used = set(t.uses) | {f[0] for f in ask.filters}
    kinds = [
        k
        for k in ("g1", "g2", "m2", "year", "attr")
        if (k if k != "year" else "date") not in used and (k != "attr" or has_dim)
    ]
    c.rng.shuffle(kinds)
    filters, words, ops = list(ask.filters), [], 0
    for kind in kinds[:n_extra]:
        made = _extra_filter(c, kind)
        if made is None:
            continue
        filters.append(made[0])
        words.append(made[1])
        ops += 2 if kind == "attr" and not t.needs_dim else 1  # a join, then a filter
    return filters, words, ops


def _defect_notes(d: Domain, mess: Mess, has_dim: bool) -> list[str]:
    m1, notes = f"`{d.m1.name}`", []
    if mess.duplicates:
        notes.append(
            "Some rows are exact copies of an earlier row (a record entered twice): count each "
            "record "
            "once."
        )
    if mess.text_numbers:
        sign = " and a $ sign" if d.m1.unit == "dollars" else ""
        notes.append(
            f"{m1} is stored as text with thousands separators{sign}; read it as a number."
        )
    if mess.units:
        base, other, factor = ALT_UNITS[d.m1.unit]
        notes.append(
            f"{m1} is recorded in {base} or in {other}, as `{unit_col(d)}` says ({factor} "
            f"{other} = "
            f"1 {base}); work in {base}."
        )
    if mess.missing:
        notes.append(
            f"Blank {m1} cells are missing values: leave them out of any calculation on {m1} (a "
            f"blank "
            "is not above or below any threshold)."
        )
    if mess.mixed_dates:
        notes.append(f"`{d.date_col}` is written either as YYYY-MM-DD or as DD/MM/YYYY.")
    if mess.timezones:
        notes.append(
            f"`{d.date_col}` is the local time of the site that recorded it, with its UTC "
            "offset; a record's date is its calendar date in UTC."
        )
    if has_dim:
        notes.append(
            f"{article(f'`{d.key}`', capital=True)} missing from the lookup table has no "
            f"`{d.attr[0]}`: leave its rows "
            f"out of "
            f"anything about `{d.attr[0]}`."
        )
    return notes


def _draw_mess(rng: np.random.Generator, t: Template, d: Domain, has_dim: bool) -> Mess:
    flags = {name: bool(rng.random() < DEFECT_RATE) for name in Mess.__dataclass_fields__}
    for name in t.needs:
        flags[name] = True
    if d.m1.unit not in ALT_UNITS:
        flags["units"] = False
    flags["orphans"] = flags["orphans"] and has_dim
    if flags["timezones"] and flags["mixed_dates"]:  # one way of writing dates per file
        flags["mixed_dates" if "timezones" in t.needs else "timezones"] = False
    if t.name == "clean_text_total":
        flags["units"] = False  # one repair per question of this template
    return Mess(**flags)


@dataclass
class Drawn:
    """Everything drawn for one attempt, before files are written."""

    template: Template
    domain: Domain
    layout: str
    mess: Mess
    rows: int
    n_extra: int


def _draw(rng: np.random.Generator, split: str, only: str | None = None) -> Drawn:
    held_family = bool(rng.random() < 0.5)
    templates, domains = pools(split, load_all(), held_family)
    if only is not None:
        templates = [x for x in templates if x.name == only]
        if not templates:
            raise ValueError(f"template {only!r} is not in the {split!r} pool")
    categories = sorted(
        {x.category for x in templates}
    )  # categories equally likely, then templates
    category = categories[int(rng.integers(len(categories)))]
    in_category = [x for x in templates if x.category == category]
    t = in_category[int(rng.integers(len(in_category)))]
    d = domains[int(rng.integers(len(domains)))]
    if "units" in t.needs and d.m1.unit not in ALT_UNITS:
        unit_domains = [x for x in domains if x.m1.unit in ALT_UNITS]
        d = unit_domains[int(rng.integers(len(unit_domains)))]
    layouts = t.layouts or (
        ("csv+csv", "csv+xlsx", "sqlite", "excel") if t.needs_dim else files.LAYOUTS
    )
    layout = str(layouts[int(rng.integers(len(layouts)))])
    has_dim = layout != "csv"
    cap = EXCEL_MAX_ROWS if files.has_workbook(layout) else MAX_ROWS
    rows = int(math.exp(rng.uniform(math.log(MIN_ROWS), math.log(cap))))
    n_extra = min(2, max(0, int(rng.choice(TARGET_DEPTHS)) - t.depth))
    return Drawn(t, d, layout, _draw_mess(rng, t, d, has_dim), rows, n_extra)


def peek(seed: int, split: str, index: int) -> dict[str, str]:
    """What attempt 0 of a task draws (category, template, domain, layout...), without making it.

    Cheap (no data), so a search can skip indices that cannot match; the task
    made may differ when attempt 0 is dropped, so a search checks the made task too.
    """
    drawn = _draw(np.random.default_rng([seed, global_number(split, index), 0]), split)
    return {
        "category": drawn.template.category,
        "family": drawn.template.family,
        "template": drawn.template.name,
        "domain": drawn.domain.name,
        "layout": drawn.layout,
        "kind": files.KIND_OF_LAYOUT[drawn.layout],
    }


def _answer(q: dict, fact: Any, dim: Any, d: Domain, mess: Mess, engine: Any) -> Any:
    """The answer to ``q`` by one engine, from the tables as that engine read them."""
    if q["op"][0] == "raw":  # about the file as written: duplicate rows, unknown keys
        return engine.raw_facts(fact, dim, d).get(q["op"][1])
    return engine.evaluate(q, engine.prepare(fact, dim, d, mess))


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


PREVIEW_MIN_INTEGER = 100
"""Integer answers below this are not looked for in previews: small counts occur in any table."""


def in_previews(paths: dict[str, str], oracle: str, style: str) -> bool:
    """Whether a numeric answer appears, as a whole number, in the file previews the reset shows."""
    if style not in ("number", "integer") or (
        style == "integer" and abs(int(oracle)) < PREVIEW_MIN_INTEGER
    ):
        return False
    shown = json.dumps([describe_file(n, p).preview for n, p in sorted(paths.items())])
    core = re.escape(oracle.lstrip("-"))
    return re.search(rf"(?<![\d.]){core}(?!\d|\.\d)", shown) is not None


@functools.cache
def shared_text() -> str:
    """What every episode shows whatever its task: the reset message, the tools, the prompts.

    A label gold that is a word of it would be "shown" to every episode (``validate``
    counts that as a leak), so such a task is dropped. Read from a snapshot shipped
    beside this module (``server.shown_text`` makes it; a test keeps the two equal).
    """
    text = resources.files(__package__).joinpath("shown_text.txt").read_text("utf-8")
    return text.removesuffix("\n")


def in_shared_text(answer: Any) -> bool:
    """Whether a label of the answer is a whole word of :func:`shared_text` (case-insensitive)."""
    atoms = answer if isinstance(answer, list) else [answer]
    labels = [a[1] if isinstance(a, (list, tuple)) else a for a in atoms]
    text = shared_text()
    return any(
        isinstance(v, str)
        and re.search(rf"(?<!\w){re.escape(v)}(?!\w)", text, re.IGNORECASE) is not None
        for v in labels
    )


def attempt(
    seed: int, split: str, index: int, tries: int, directory: Path, only: str | None = None
) -> Task:
    """One attempt at task ``index`` of ``split``; files go into ``directory`` (existing, empty).

    ``only`` restricts the draw to one template (for checking a template on its own).
    """
    number = global_number(split, index)
    rng = np.random.default_rng([seed, number, tries])
    drawn = _draw(rng, split, only)
    t, d = drawn.template, drawn.domain
    truth = draw(d, rng, drawn.rows)
    ctx = Ctx(d, _records(truth.fact, truth.dim, d), rng)
    ask = t.fn(ctx)
    if ask is None:
        raise Dropped("template-unsuited")
    place = files.placement(d, drawn.layout)
    has_dim = place.dim_file is not None
    filters, words, extra_ops = _compose(ctx, t, ask, drawn.n_extra, has_dim)
    depth = min(t.depth + extra_ops, 6)
    query = {"filters": filters, "op": ask.op}
    if uses_attr(query) and not has_dim:
        raise Dropped("no-lookup-table")
    question = ask.question + (
        f", counting only the {ctx.entity_plural()} " + " and ".join(words) if words else ""
    )
    question += "." if ask.style in BOOK_STYLES else "?"
    notes = " ".join(_defect_notes(d, drawn.mess, has_dim and uses_attr(query)))
    if ask.style == "column":  # an edit of the file as written: no repair to do, none to state
        notes = ""
    describe = f"{question}\n\n{files.describe(place)}" + (f" {notes}" if notes else "")
    fact, dim = apply_mess(truth, drawn.mess, rng)
    made = Made(split, index, drawn, depth, int(len(fact)))
    if ask.style in BOOK_STYLES:
        try:
            return _book_task(made, ask, query, describe, place, fact, dim, directory)
        except books.Unscorable as exc:
            raise Dropped(exc.reason) from None

    def worded(gold: Any) -> tuple[Draft, str, tuple]:
        """The draft, the instruction and the (oracle, answer, verifier) for ``gold``; Dropped
        if they cannot be fair."""
        if gold is None or (isinstance(gold, (list, str)) and not gold):
            raise Dropped("undefined-answer")
        draft = _draft(ask, gold, question, level_of(depth), d)
        instruction = f"{describe}\n\n{format_sentence(draft)}"
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
    if draft.style in ("text", "set", "list", "parts") and in_shared_text(answer):
        raise Dropped("answer-in-shared-text")
    return made.task(instruction, paths, answer, oracle, verifier)


BOOK_STYLES = ("workbook", "column")
"""Answer styles scored on a workbook the agent saves (``books``), not on its words."""


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
