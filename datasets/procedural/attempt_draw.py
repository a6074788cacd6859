"""What one attempt at a procedural task draws before any data is made.

The template (categories equally likely, then templates), the domain, the file
layout, the defects, the row count and how many filters composition adds, all
from the attempt's random generator and in a fixed order: the order is part of
what makes ``(seed, split, index)`` name one task, so :func:`peek` can tell
what attempt 0 of an index draws without making it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from analyst_env.datasets.procedural import files
from analyst_env.datasets.procedural.domain_schema import Domain
from analyst_env.datasets.procedural.splits import global_number, pools
from analyst_env.datasets.procedural.tables import ALT_UNITS, Mess
from analyst_env.datasets.procedural.templates import Template, load_all

TARGET_DEPTHS = (1, 2, 3, 4, 5)
"""Composition adds filters until a task's depth reaches a target drawn from these."""
DEFECT_RATE = 0.25
EXCEL_MAX_ROWS = 120
MAX_ROWS = 2000
MIN_ROWS = 40


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


def draw_attempt(rng: np.random.Generator, split: str, only: str | None = None) -> Drawn:
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
    cap = min(EXCEL_MAX_ROWS if files.has_workbook(layout) else MAX_ROWS, t.max_rows or MAX_ROWS)
    rows = int(math.exp(rng.uniform(math.log(MIN_ROWS), math.log(cap))))
    n_extra = min(2, max(0, int(rng.choice(TARGET_DEPTHS)) - t.depth))
    return Drawn(t, d, layout, _draw_mess(rng, t, d, has_dim), rows, n_extra)


def peek(seed: int, split: str, index: int) -> dict[str, str]:
    """What attempt 0 of a task draws (category, template, domain, layout...), without making it.

    Cheap (no data), so a search can skip indices that cannot match; the task
    made may differ when attempt 0 is dropped, so a search checks the made task too.
    """
    drawn = draw_attempt(np.random.default_rng([seed, global_number(split, index), 0]), split)
    return {
        "category": drawn.template.category,
        "family": drawn.template.family,
        "template": drawn.template.name,
        "domain": drawn.domain.name,
        "layout": drawn.layout,
        "kind": files.KIND_OF_LAYOUT[drawn.layout],
    }


def peek_depth(seed: int, split: str, index: int) -> int:
    """The depth attempt 0 of a task aims at (template depth plus composed filters), cheaply.

    The made task's own ``metadata['depth']`` is the truth (a join counts twice, attempt 0
    may be dropped); the curriculum uses this to skip indices without making them.
    """
    drawn = draw_attempt(np.random.default_rng([seed, global_number(split, index), 0]), split)
    return min(drawn.template.depth + drawn.n_extra, 6)
