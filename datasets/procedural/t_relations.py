"""Join, cohort, funnel, set-operation and SQL templates: the fact table read with its lookup
table."""

from __future__ import annotations

from analyst_env.datasets.procedural.templates import Ask, Ctx, template

SET_DIFFERENCE_MAX_ROWS = 80
"""Above about this many records every label occurs with every other, and "which values occur
with a but never with b" has no answer: the set-difference templates draw at most this many."""


def _via(c: Ctx) -> str:
    return f"the {c.col('attr')} of each {c.domain.entity}'s {c.col('key')} in the lookup table"


def _which_attr(c: Ctx, criterion: str, op: tuple) -> Ask:
    """The question "Using <the lookup attribute>, which `attr` <criterion>", whose answer is
    one ``attr`` value."""
    return Ask(
        f"Using {_via(c)}, which {c.col('attr')} {criterion}",
        op,
        "text",
        what=f"{c.col('attr')} value",
    )


@template("joins", "join-group", 3, "attr m1", needs_dim=True)
def join_top_attr_sum(c: Ctx) -> Ask | None:
    return _which_attr(
        c, f"has the highest total {c.col('m1')}", ("group", "attr", "sum", "m1", ("argmax",))
    )


@template("joins", "join-group", 3, "attr m1", needs_dim=True)
def join_top_attr_mean(c: Ctx) -> Ask | None:
    return _which_attr(
        c, f"has the highest average {c.col('m1')}", ("group", "attr", "mean", "m1", ("argmax",))
    )


@template("joins", "join-filter", 2, "attr", needs_dim=True)
def join_count_attr(c: Ctx) -> Ask | None:
    v = c.pick("attr")
    return Ask(
        f"How many {c.entity_plural()} belong to {c.a('key')} whose {c.col('attr')} in the "
        f"lookup "
        f"table is {v}",
        ("count",),
        "integer",
        filters=[("attr", "eq", v)],
    )


@template("joins", "join-filter", 3, "attr m1", needs_dim=True)
def join_sum_attr(c: Ctx) -> Ask | None:
    v = c.pick("attr")
    return Ask(
        f"What is the total {c.col('m1')} of the {c.entity_plural()} whose {c.col('key')} has "
        f"{c.col('attr')} {v} in the lookup table",
        ("agg", "sum", "m1"),
        "number",
        filters=[("attr", "eq", v)],
    )


@template("joins", "join-group", 3, "attr key", needs_dim=True)
def join_keys_per_attr(c: Ctx) -> Ask | None:
    return _which_attr(
        c,
        f"has the most distinct {c.col('key')} values with at least one {c.domain.entity}",
        ("group", "attr", "nunique", "key", ("argmax",)),
    )


@template("joins", "join-rank", 4, "attr m1", needs_dim=True)
def join_rank_attr(c: Ctx) -> Ask | None:
    if c.records["attr"].nunique() < 3:
        return None
    return Ask(
        f"Using {_via(c)}, rank the {c.col('attr')} values by total {c.col('m1')}",
        ("group", "attr", "sum", "m1", ("top", int(c.records["attr"].nunique()))),
        "list",
        what=f"{c.col('attr')} values",
        order="ordered from the highest total",
    )


def _cohort_month(c: Ctx, measure: str) -> str | None:
    """A cohort month to ask about (any month with data but the last), drawn among those whose
    ``measure`` (``size`` or ``retained``) on the clean records is not zero and is not spelled
    by the month's own name: "3" is in "2023-03", and a count that the question spells out
    is a count given away. None when no month qualifies."""
    first: dict[str, str] = {}
    last: dict[str, str] = {}
    for key, month in zip(c.records["key"], c.records["date"].dt.strftime("%Y-%m")):
        if isinstance(month, str):
            first[key] = min(first.get(key, month), month)
            last[key] = max(last.get(key, month), month)
    counts: dict[str, int] = {}
    for key, month in first.items():
        counts[month] = counts.get(month, 0) + (measure == "size" or last[key] > month)
    months = c.months()
    fit = [m for m in months[:-1] or months if counts.get(m) and str(counts[m]) not in m]
    return str(c.rng.choice(fit)) if fit else None


@template("cohorts-funnels", "cohort", 2, "key date")
def cohort_size(c: Ctx) -> Ask | None:
    month = _cohort_month(c, "size")
    if month is None:
        return None
    return Ask(
        f"{c.a('key', capital=True)}'s cohort is the month (YYYY-MM) of its first "
        f"{c.domain.entity}. How many {c.col('key')} values are in the {month} cohort",
        ("cohort", month, "size"),
        "integer",
    )


@template("cohorts-funnels", "cohort", 3, "key date")
def cohort_retained(c: Ctx) -> Ask | None:
    month = _cohort_month(c, "retained")
    if month is None:
        return None
    return Ask(
        f"{c.a('key', capital=True)}'s cohort is the month (YYYY-MM) of its first "
        f"{c.domain.entity}. Of the {month} cohort, how many {c.col('key')} values have "
        f"{c.a('entity')} in a later month",
        ("cohort", month, "retained"),
        "integer",
    )


@template("cohorts-funnels", "funnel", 2, "key g2")
def funnel_both_steps(c: Ctx) -> Ask | None:
    pair = c.pick_two("g2")
    if pair is None:
        return None
    a, b = pair
    return Ask(
        f"How many distinct {c.col('key')} values have at least one {c.domain.entity} with "
        f"{c.col('g2')} {a} and at least one with {c.col('g2')} {b}",
        ("funnel_both", a, b),
        "integer",
    )


@template("set-operations", "difference", 2, "g1 g2", max_rows=SET_DIFFERENCE_MAX_ROWS)
def set_only_with(c: Ctx) -> Ask | None:
    pair = c.pick_only_with("g1")
    if pair is None:
        return None
    a, b = pair
    return Ask(
        f"Which {c.col('g1')} values occur on some {c.domain.entity} with {c.col('g2')} {a} but "
        f"on no "
        f"{c.domain.entity} with {c.col('g2')} {b}",
        ("set_only", "g1", a, b),
        "set",
        what=f"{c.col('g1')} values",
    )


@template(
    "set-operations",
    "difference",
    2,
    "key",
    needs_dim=True,
    needs=("orphans",),
    composable=False,
)
def set_orphan_keys(c: Ctx) -> Ask | None:
    return Ask(
        f"How many distinct {c.col('key')} values of the {c.entity_plural()} are missing from the "
        "lookup table",
        ("raw", "orphan_keys"),
        "integer",
    )


@template(
    "set-operations", "difference", 3, "attr g2", needs_dim=True, max_rows=SET_DIFFERENCE_MAX_ROWS
)
def set_attr_only_with(c: Ctx) -> Ask | None:
    pair = c.pick_only_with("attr")
    if pair is None:
        return None
    a, b = pair
    return Ask(
        f"Using {_via(c)}, which {c.col('attr')} values occur on some {c.domain.entity} with "
        f"{c.col('g2')} {a} but on no {c.domain.entity} with {c.col('g2')} {b}",
        ("set_only", "attr", a, b),
        "set",
        what=f"{c.col('attr')} values",
    )


@template("sql", "sql-join", 3, "attr m1", needs_dim=True, layouts=("sqlite",))
def sql_attr_avg(c: Ctx) -> Ask | None:
    v = c.pick("attr")
    return Ask(
        f"Joining the two tables on {c.col('key')}, what is the average {c.col('m1')} of the "
        f"rows whose "
        f"{c.col('attr')} is {v}",
        ("agg", "mean", "m1"),
        "number",
        filters=[("attr", "eq", v)],
    )


@template("sql", "sql-join", 4, "attr g1 m1", needs_dim=True, layouts=("sqlite",))
def sql_attr_group_top(c: Ctx) -> Ask | None:
    v = c.pick("attr")
    return Ask(
        f"Joining the two tables on {c.col('key')}, and keeping the rows whose {c.col('attr')} "
        f"is {v}, "
        f"which {c.col('g1')} has the highest total {c.col('m1')}",
        ("group", "g1", "sum", "m1", ("argmax",)),
        "text",
        what=f"{c.col('g1')} value",
        filters=[("attr", "eq", v)],
    )


@template("sql", "sql-join", 3, "attr key", needs_dim=True, layouts=("sqlite",))
def sql_attr_distinct(c: Ctx) -> Ask | None:
    v = c.pick("attr")
    return Ask(
        f"Joining the two tables on {c.col('key')}, how many distinct {c.col('key')} values with "
        f"{c.col('attr')} {v} have at least one row",
        ("agg", "nunique", "key"),
        "integer",
        filters=[("attr", "eq", v)],
    )
