"""Percentile, statistical-test, correlation and outlier templates."""

from __future__ import annotations

from analyst_env.datasets.procedural.templates import Ask, Ctx, template

LINEAR = "percentiles interpolate linearly between the closest ranks, as numpy's default does"


def _percentile(role: str) -> None:
    def build(c: Ctx) -> Ask | None:
        p = int(c.rng.choice([10, 25, 75, 90, 95]))
        return Ask(
            f"What is the {p}th percentile of {c.col(role)} ({LINEAR})",
            ("percentile", role, p),
            "number",
        )

    template("percentiles", "percentile", 1, role, name=f"pct_{role}")(build)


_percentile("m1")
_percentile("m2")


@template("percentiles", "percentile", 2, "m1")
def pct_iqr_m1(c: Ctx) -> Ask | None:
    return Ask(
        f"What is the interquartile range (75th minus 25th percentile) of {c.col('m1')} ({LINEAR})",
        ("iqr", "m1"),
        "number",
    )


def _welch(by: str) -> None:
    def build(c: Ctx) -> Ask | None:
        pair = c.pick_two(by)
        if pair is None:
            return None
        a, b = pair
        return Ask(
            f"Compare {c.col('m1')} between the {c.entity_plural()} whose {c.col(by)} is {a} "
            f"and those "
            f"whose {c.col(by)} is {b}. What is Welch's t statistic (mean of {a} minus mean of "
            f"{b}, "
            "divided by the square root of the sum of each group's sample variance over its size)",
            ("welch", "m1", by, a, b),
            "number",
        )

    template("statistical-tests", "t-test", 2, f"m1 {by}", name=f"welch_t_{by}")(build)


_welch("g1")
_welch("g2")


@template("correlation", "correlation", 1, "m1 m2")
def corr_m1_m2(c: Ctx) -> Ask | None:
    return Ask(
        f"What is the Pearson correlation coefficient between {c.col('m1')} and {c.col('m2')} "
        f"(rows "
        "with either value missing left out)",
        ("corr", "m1", "m2"),
        "number",
        decimals=3,
    )


@template("correlation", "correlation", 2, "m1 m2 g1")
def corr_within_group(c: Ctx) -> Ask | None:
    v = c.pick("g1")
    return Ask(
        f"Among the {c.entity_plural()} whose {c.col('g1')} is {v}, what is the Pearson "
        f"correlation "
        f"coefficient between {c.col('m1')} and {c.col('m2')}",
        ("corr", "m1", "m2"),
        "number",
        decimals=3,
        filters=[("g1", "eq", v)],
    )


def _zcount(role: str) -> None:
    def build(c: Ctx) -> Ask | None:
        z = float(c.rng.choice([2.0, 2.5, 3.0]))
        return Ask(
            f"How many {c.entity_plural()} have {c.a(role)} whose z-score (distance from "
            f"the mean in "
            f"sample standard deviations, n - 1) is larger than {z:g} in absolute value",
            ("zcount", role, z),
            "integer",
        )

    template("outliers", "z-score", 2, role, name=f"outlier_z_{role}")(build)


_zcount("m1")
_zcount("m2")


@template("outliers", "iqr-rule", 2, "m1")
def outlier_iqr_m1(c: Ctx) -> Ask | None:
    return Ask(
        f"How many {c.entity_plural()} have {c.a('m1')} more than 1.5 interquartile ranges "
        f"below "
        f"the 25th or above the 75th percentile ({LINEAR})",
        ("iqr_outliers", "m1"),
        "integer",
    )
