"""Group-by, ranking, pivot and window templates."""

from __future__ import annotations

from analyst_env.datasets.procedural.templates import Ask, Ctx, fmt_value, template

FN_WORDS = {"sum": "the highest total", "mean": "the highest average", "count": "the most"}
LOW_WORDS = {"sum": "the lowest total", "mean": "the lowest average", "count": "the fewest"}


def _measure(fn: str, c: Ctx, role: str = "m1") -> str:
    return c.entity_plural() if fn == "count" else c.col(role)


def _argmax(fn: str, by: str, low: bool) -> None:
    def build(c: Ctx) -> Ask | None:
        words = (LOW_WORDS if low else FN_WORDS)[fn]
        return Ask(
            f"Which {c.col(by)} has {words} {_measure(fn, c)}",
            ("group", by, fn, "m1", ("argmin",) if low else ("argmax",)),
            "text",
            what=f"{c.col(by)} value",
        )

    name = f"group_{'argmin' if low else 'argmax'}_{fn}_{by}"
    template("group-by", "group-extreme", 2, f"{by} m1", name=name)(build)


for _by in ("g1", "g2"):
    for _fn in ("sum", "mean", "count"):
        _argmax(_fn, _by, low=False)
    for _fn in ("sum", "mean"):
        _argmax(_fn, _by, low=True)


def _value_of(fn: str) -> None:
    def build(c: Ctx) -> Ask | None:
        v = c.pick("g1")
        word = {"sum": "total", "mean": "average", "max": "largest"}[fn]
        return Ask(
            f"What is the {word} {c.col('m1')} of the {c.entity_plural()} whose {c.col('g1')} "
            f"is {v}",
            ("group", "g1", fn, "m1", ("value", v)),
            "number",
        )

    template("group-by", "group-value", 2, "g1 m1", name=f"group_value_{fn}_g1")(build)


for _fn in ("sum", "mean", "max"):
    _value_of(_fn)


@template("group-by", "group-spread", 3, "g1 m1")
def group_mean_spread(c: Ctx) -> Ask | None:
    return Ask(
        f"Compute the average {c.col('m1')} for each {c.col('g1')}. What is the difference between "
        "the largest and the smallest of these averages",
        ("group", "g1", "mean", "m1", ("spread",)),
        "number",
    )


@template("group-by", "group-share", 3, "g2 m1")
def group_share(c: Ctx) -> Ask | None:
    v = c.pick("g2")
    return Ask(
        f"What percentage of the total {c.col('m1')} comes from {c.entity_plural()} whose "
        f"{c.col('g2')} is {v}",
        ("group", "g2", "sum", "m1", ("share", v)),
        "number",
    )


def _topk(fn: str, by: str, low: bool) -> None:
    def build(c: Ctx) -> Ask | None:
        n = c.records[by].nunique()
        if n < 3:
            return None
        k = int(c.rng.integers(2, min(4, n - 1) + 1))
        words = (LOW_WORDS if low else FN_WORDS)[fn]
        order = "from the lowest" if low else "from the highest"
        return Ask(
            f"Which {k} {c.col(by)} values have {words} {_measure(fn, c)}",
            ("group", by, fn, "m1", ("bottom" if low else "top", k)),
            "list",
            what=f"{c.col(by)} values",
            order=f"ordered {order}",
        )

    name = f"rank_{'bottom' if low else 'top'}k_{fn}_{by}"
    template("ranking", "top-k", 3, f"{by} m1", name=name)(build)


for _fn in ("sum", "mean", "count"):
    _topk(_fn, "g1", low=False)
_topk("sum", "g1", low=True)
_topk("sum", "g2", low=False)


@template("ranking", "kth", 3, "g1 m1")
def rank_second_sum_g1(c: Ctx) -> Ask | None:
    return Ask(
        f"Rank the {c.col('g1')} values by total {c.col('m1')}, highest first. Which one is second",
        ("group", "g1", "sum", "m1", ("kth", 2)),
        "text",
        what=f"{c.col('g1')} value",
    )


def _pivot(c: Ctx, fn: str) -> str:
    """The pivot every pivot question is about: ``g1`` rows, ``g2`` columns, the total (or
    average) ``m1`` in the cells."""
    return (
        f"Pivot the {c.entity_plural()} with {c.col('g1')} as rows, {c.col('g2')} as columns "
        f"and the {fn} {c.col('m1')} in the cells"
    )


@template("pivot", "pivot", 3, "g1 g2 m1")
def pivot_top_cell(c: Ctx) -> Ask | None:
    return Ask(
        f"{_pivot(c, 'total')}. Which cell holds the largest total",
        ("group", "pivot", "sum", "m1", ("argmax",)),
        "pair",
    )


@template("pivot", "pivot", 3, "g1 g2 m1")
def pivot_cells_above(c: Ctx) -> Ask | None:
    per = c.records.groupby(["g1", "g2"])["m1"].sum()
    t = float(f"{float(per.quantile(c.rng.uniform(0.3, 0.7))):.2g}")
    return Ask(
        f"{_pivot(c, 'total')}. How many non-empty cells hold a total greater than {fmt_value(t)}",
        ("group", "pivot", "sum", "m1", ("count_above", t)),
        "integer",
    )


@template("pivot", "pivot", 3, "g1 g2 m1")
def pivot_cell_count(c: Ctx) -> Ask | None:
    a, b = c.pick("g1"), c.pick("g2")
    return Ask(
        f"{_pivot(c, 'average')}. What is the value in row {a}, column {b}",
        ("group", "pivot", "mean", "m1", ("value", f"{a}|{b}")),
        "number",
    )


@template("window", "window", 3, "g1 m1 id")
def window_top_per_group(c: Ctx) -> Ask | None:
    return Ask(
        f"Within each {c.col('g1')}, find the {c.domain.entity} with the largest {c.col('m1')}. "
        f"Which "
        f"{c.col('id')} values are they",
        ("top_per_group", "g1", "m1"),
        "set",
        what=f"{c.col('id')} values",
    )


@template("window", "window", 3, "g1 m1")
def window_top3_mean(c: Ctx) -> Ask | None:
    return Ask(
        f"For each {c.col('g1')}, take the average of its three largest {c.col('m1')} values. "
        f"Which "
        f"{c.col('g1')} has the highest such average",
        ("group_topn_mean", "g1", "m1", 3),
        "text",
        what=f"{c.col('g1')} value",
    )


@template("window", "window", 3, "date m1")
def window_daily_jump(c: Ctx) -> Ask | None:
    return Ask(
        f"Total {c.col('m1')} per calendar day (days with no {c.entity_plural()} are skipped). "
        f"What is "
        "the largest increase from one such day to the next",
        ("daily_jump",),
        "number",
    )


@template("window", "window", 4, "g1 date m1 id")
def window_running_half(c: Ctx) -> Ask | None:
    v = c.pick("g1")
    return Ask(
        f"Take the {c.entity_plural()} whose {c.col('g1')} is {v}, in order of {c.col('date')} "
        f"(then "
        f"{c.col('id')}), and keep a running total of {c.col('m1')}. On which date does the "
        f"running "
        "total first reach half of the final total",
        ("running_share", "g1", v, 50.0),
        "text",
        what="date in YYYY-MM-DD form",
    )
