"""The question templates, registered by category; each asks one thing a query (``query``) computes.

A template is a function ``(ctx) -> Ask | None`` registered with
:func:`template`. It draws its parameters from the task's clean tables (so a
named group exists and a threshold splits the rows), words the question in the
domain's own column names, and states every rule the answer depends on (which
standard deviation, how percentiles interpolate). ``None`` means the drawn
data does not suit it (too few groups); the generator then draws again.

The category modules (``t_basic``, ``t_groups``, ``t_time``, ``t_stats``,
``t_clean``, ``t_relations``, ``t_books``, ``t_findings``, ``t_charts``) hold the
templates; this module holds the registry and the shared wording helpers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from analyst_env.datasets.procedural.domain_schema import Domain
from analyst_env.datasets.procedural.grammar import article, plural

CATEGORIES = (
    "filtering",
    "aggregation",
    "group-by",
    "joins",
    "window",
    "pivot",
    "time-series",
    "ranking",
    "percentiles",
    "statistical-tests",
    "correlation",
    "outliers",
    "cleaning",
    "deduplication",
    "cohorts-funnels",
    "set-operations",
    "sql",
    "excel-edit",
    "result-workbook",
    "findings",
    "charts",
)
"""The analysis categories templates are filed under (docs/tasks.md lists them with their
  templates)."""


@dataclass
class Ctx:
    """What a template may look at: the domain, the clean records by role, and a seeded rng."""

    domain: Domain
    records: pd.DataFrame  # clean truth by role: id, date, g1, g2, key, m1, m2, attr
    rng: np.random.Generator

    def pick(self, role: str, exclude: tuple = ()) -> str | None:
        """One value of a text role (g1, g2, attr), drawn from its distinct values in order."""
        values = sorted({str(v) for v in self.records[role].dropna().unique()} - set(exclude))
        return str(self.rng.choice(values)) if values else None

    def pick_two(self, role: str) -> tuple[str, str] | None:
        """Two different values of ``role`` (drawn one after the other), or None when it has
        fewer than two: the pair a comparison or a set difference is asked about."""
        a = self.pick(role)
        b = self.pick(role, exclude=(a,))
        return None if a is None or b is None else (a, b)

    def pick_only_with(self, by: str) -> tuple[str, str] | None:
        """Two different ``g2`` values (a, b) such that some ``by`` value occurs with a and
        never with b in the clean records, drawn among all such pairs; None when no pair has
        one. On a large table most pairs share every value: the set difference asked about
        ("occurs with a but never with b") would be empty, with no answer to ask for."""
        seen: dict[str, set[str]] = {}
        for g2, value in zip(self.records["g2"], self.records[by]):
            if isinstance(value, str):
                seen.setdefault(str(g2), set()).add(value)
        names = sorted(seen)
        pairs = [(a, b) for a in names for b in names if a != b and seen[a] - seen[b]]
        return pairs[int(self.rng.integers(len(pairs)))] if pairs else None

    def consecutive_months(self) -> tuple[str, str] | None:
        """A month with data and the next month with data (YYYY-MM), or None with fewer than
        two such months: the pair a month-on-month change is asked about."""
        months = self.months()
        if len(months) < 2:
            return None
        i = int(self.rng.integers(0, len(months) - 1))
        return months[i], months[i + 1]

    def col(self, role: str) -> str:
        """The column name the files use for a role, in backticks."""
        return f"`{self.domain.role_columns()[role]}`"

    def threshold(self, role: str) -> float:
        """A two-significant-figure threshold inside the middle half of ``role``'s values."""
        s = self.records[role].dropna()
        return float(f"{float(s.quantile(self.rng.uniform(0.25, 0.75))):.2g}")

    def totals_per(self, period: str) -> str:
        """How a question names the series it is about: "Total `m1` per calendar month of
        `date`" (``period``: month or quarter)."""
        return f"Total {self.col('m1')} per calendar {period} of {self.col('date')}"

    def months(self) -> list[str]:
        return sorted(set(self.records["date"].dt.strftime("%Y-%m")))

    def entity_plural(self) -> str:
        """The records' noun in the plural ("stays", "grade records")."""
        return plural(self.domain.entity)

    def a(self, role: str, capital: bool = False) -> str:
        """A role's column (or ``entity``: the records' noun) after its article: "an `agent_id`"."""
        return article(self.domain.entity if role == "entity" else self.col(role), capital)


@dataclass(frozen=True)
class SheetAsk:
    """The sheet a workbook template asks for (style ``workbook``).

    The first column holds the group label (``label``: header, meaning); each of
    ``columns`` (header, meaning, decimals or None) holds one value of the
    query's table, in the op's order. ``in_place``: the sheet is added to the
    input workbook, saved under its own name, instead of a new ``result.xlsx``.
    """

    name: str
    what: str
    label: tuple[str, str]
    columns: tuple[tuple[str, str, int | None], ...]
    order: str
    in_place: bool = False


@dataclass
class Ask:
    """A template's question: its words, its query's op, and how the answer is written.

    ``style`` is ``number``, ``integer``, ``text``, ``set``, ``list`` or ``pair`` for an
    answer in words; ``workbook`` for a sheet (``sheet`` says which); ``column`` for a
    column added in place to the input workbook's records sheet; ``chart`` for a figure
    saved as SVG (``what`` names its kind, ``order`` a bar chart's order: ``desc`` or
    ``label``).
    """

    question: str
    op: tuple
    style: str
    decimals: int = 2
    what: str = ""
    order: str = ""
    filters: list = field(default_factory=list)  # the template's own filters (part of its meaning)
    sheet: SheetAsk | None = None


@dataclass(frozen=True)
class Template:
    name: str
    category: str
    family: str
    depth: int  # operations the template itself chains (filters added by composition come on top)
    uses: frozenset  # roles the template's own logic reads: composition never filters on them
    needs_dim: bool
    needs: tuple  # defects the files must carry (Mess field names)
    layouts: tuple | None  # None: any layout that suits needs_dim
    fn: Callable[[Ctx], Ask | None]
    composable: bool = True  # False: the answer is about the file as a whole; no filters are added
    max_rows: int | None = None  # a cap on the records drawn, below the file layout's own


TEMPLATES: list[Template] = []


def template(
    category: str,
    family: str,
    depth: int,
    uses: str,
    needs_dim: bool = False,
    needs: tuple = (),
    layouts: tuple | None = None,
    composable: bool = True,
    name: str | None = None,
    max_rows: int | None = None,
) -> Callable:
    """Register a template (decorator). ``uses`` is a space-separated list of roles.

    ``name`` is the template's name in the registry, by default the function's own; a factory
    that registers one inner function once per variant names each variant.

    ``composable=False`` marks a template whose answer is about the whole file
    (duplicate rows, keys missing from the lookup table): composition adds no
    filter to it, since a filter in its question would change nothing in its answer.

    ``max_rows`` caps the records drawn for the template, for a question that has an
    answer only on a small table (on a large one every value occurs with every other).
    """
    if category not in CATEGORIES:
        raise ValueError(f"unknown category {category!r}")

    def deco(fn: Callable[[Ctx], Ask | None]) -> Callable[[Ctx], Ask | None]:
        TEMPLATES.append(
            Template(
                name or fn.__name__,
                category,
                family,
                depth,
                frozenset(uses.split()),
                needs_dim,
                needs,
                layouts,
                fn,
                composable,
                max_rows,
            )
        )
        return fn

    return deco


def count_in_a_month(c: Ctx, reading: str) -> Ask:
    """How many records are dated in a drawn month that has data; ``reading`` (the question's
    closing parenthesis) says how a date is read, which is what the cleaning variants test."""
    month = str(c.rng.choice(c.months()))
    return Ask(
        f"How many {c.entity_plural()} are dated in {month} ({reading})",
        ("count",),
        "integer",
        filters=[("date", "month", month)],
    )


def fmt_value(x: Any) -> str:
    """A threshold or label as the question writes it."""
    if isinstance(x, float):
        return f"{x:g}" if abs(x) < 1e15 else str(x)
    return str(x)


def load_all() -> list[Template]:
    """Import the category modules (they register their templates) and return the registry."""
    from analyst_env.datasets.procedural import (  # noqa: F401 (imported to register)
        t_basic,
        t_books,
        t_charts,
        t_clean,
        t_findings,
        t_groups,
        t_relations,
        t_stats,
        t_time,
    )

    return TEMPLATES
