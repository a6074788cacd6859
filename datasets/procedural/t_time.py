"""Time-series templates: monthly and quarterly totals, growth, rolling means."""

from __future__ import annotations

from analyst_env.datasets.procedural.templates import Ask, Ctx, template


def _top_total(period: str, what: str) -> None:
    """Register ``ts_{period}_top_sum``: which month (or quarter) has the highest total."""

    def build(c: Ctx) -> Ask | None:
        return Ask(
            f"{c.totals_per(period)}. Which {period} has the highest total",
            ("group", period, "sum", "m1", ("argmax",)),
            "text",
            what=what,
        )

    template("time-series", "resample", 2, "date m1", name=f"ts_{period}_top_sum")(build)


# Registered in this order (a seed draws a template by its place in the registry).
_top_total("month", "month in YYYY-MM form")


@template("time-series", "resample", 2, "date")
def ts_month_fewest(c: Ctx) -> Ask | None:
    return Ask(
        f"Count the {c.entity_plural()} per calendar month of {c.col('date')} (months with none "
        "are not counted). Which month has the fewest",
        ("group", "month", "count", "m1", ("argmin",)),
        "text",
        what="month in YYYY-MM form",
    )


_top_total("quarter", "quarter in YYYY-Qn form (e.g. 2023-Q4)")


@template("time-series", "resample", 2, "date m1")
def ts_month_mean_value(c: Ctx) -> Ask | None:
    month = str(c.rng.choice(c.months()))
    return Ask(
        f"What is the average {c.col('m1')} of the {c.entity_plural()} dated in {month}",
        ("group", "month", "mean", "m1", ("value", month)),
        "number",
    )


@template("time-series", "growth", 3, "date m1")
def ts_growth(c: Ctx) -> Ask | None:
    pair = c.consecutive_months()
    if pair is None:
        return None
    a, b = pair
    return Ask(
        f"{c.totals_per('month')}. By what percentage did the total change from {a} to {b} "
        "(negative for a fall)",
        ("growth", a, b),
        "number",
    )


@template("time-series", "rolling", 3, "date m1")
def ts_rolling_max(c: Ctx) -> Ask | None:
    w = int(c.rng.choice([2, 3, 4]))
    return Ask(
        f"{c.totals_per('month')}, from the first to the last month "
        f"with data (a month with no {c.entity_plural()} counts as 0). What is the largest "
        f"{w}-month "
        "rolling average of these monthly totals",
        ("rolling_max", w),
        "number",
    )
