"""Filtering and whole-table aggregation templates."""

from __future__ import annotations

from analyst_env.datasets.procedural.templates import (
    Ask,
    Ctx,
    count_in_a_month,
    fmt_value,
    template,
)

AGG_WORDS = {
    "sum": "total",
    "mean": "average",
    "min": "smallest",
    "max": "largest",
    "median": "median",
    "std": "sample standard deviation (n - 1 denominator) of",
}


@template("filtering", "filter", 2, "g1")
def count_group_rows(c: Ctx) -> Ask | None:
    v = c.pick("g1")
    return Ask(
        f"How many {c.entity_plural()} have {c.col('g1')} equal to {v}",
        ("count",),
        "integer",
        filters=[("g1", "eq", v)],
    )


@template("filtering", "filter", 2, "m1")
def count_above(c: Ctx) -> Ask | None:
    t = c.threshold("m1")
    return Ask(
        f"How many {c.entity_plural()} have {c.col('m1')} greater than {fmt_value(t)}",
        ("count",),
        "integer",
        filters=[("m1", "gt", t)],
    )


@template("filtering", "filter", 2, "m2")
def count_below(c: Ctx) -> Ask | None:
    t = c.threshold("m2")
    return Ask(
        f"How many {c.entity_plural()} have {c.col('m2')} less than {fmt_value(t)}",
        ("count",),
        "integer",
        filters=[("m2", "lt", t)],
    )


@template("filtering", "filter", 2, "date")
def count_in_month(c: Ctx) -> Ask | None:
    return count_in_a_month(c, f"year-month, by {c.col('date')}")


@template("filtering", "filter", 3, "m1 g1")
def count_group_above(c: Ctx) -> Ask | None:
    v, t = c.pick("g1"), c.threshold("m1")
    return Ask(
        f"How many {c.entity_plural()} with {c.col('g1')} equal to {v} have {c.col('m1')} greater "
        f"than {fmt_value(t)}",
        ("count",),
        "integer",
        filters=[("g1", "eq", v), ("m1", "gt", t)],
    )


def _agg_template(fn: str, role: str, name: str) -> None:
    def build(c: Ctx) -> Ask | None:
        unit = c.domain.m1.unit if role == "m1" else c.domain.m2.unit
        return Ask(
            f"What is the {AGG_WORDS[fn]} {c.col(role)} ({unit}) over all {c.entity_plural()}",
            ("agg", fn, role),
            "number",
            decimals=2,
        )

    template("aggregation", "aggregate", 1, role, name=name)(build)


for _fn in ("sum", "mean", "min", "max", "median", "std"):
    _agg_template(_fn, "m1", f"agg_{_fn}_m1")
for _fn in ("sum", "mean", "median"):
    _agg_template(_fn, "m2", f"agg_{_fn}_m2")


@template("aggregation", "aggregate", 1, "key")
def agg_distinct_keys(c: Ctx) -> Ask | None:
    return Ask(
        f"How many distinct {c.col('key')} values appear in the {c.entity_plural()}",
        ("agg", "nunique", "key"),
        "integer",
    )


@template("aggregation", "aggregate", 2, "m1 m2")
def agg_mean_per_unit(c: Ctx) -> Ask | None:
    t = c.threshold("m2")
    return Ask(
        f"What is the average {c.col('m1')} of the {c.entity_plural()} whose {c.col('m2')} is "
        f"greater than {fmt_value(t)}",
        ("agg", "mean", "m1"),
        "number",
        filters=[("m2", "gt", t)],
    )
