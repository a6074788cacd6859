"""Cleaning and deduplication templates: they exist only on files with the defect they ask about."""

from __future__ import annotations

from analyst_env.datasets.procedural.templates import Ask, Ctx, count_in_a_month, template


@template("cleaning", "missing", 1, "m1", needs=("missing",))
def clean_missing_count(c: Ctx) -> Ask | None:
    return Ask(
        f"How many {c.entity_plural()} have no {c.col('m1')} value (a blank cell)",
        ("missing", "m1"),
        "integer",
    )


@template("cleaning", "type-repair", 2, "m1", needs=("text_numbers",))
def clean_text_total(c: Ctx) -> Ask | None:
    return Ask(
        f"What is the total {c.col('m1')} over all {c.entity_plural()}",
        ("agg", "sum", "m1"),
        "number",
    )


@template("cleaning", "unit-repair", 2, "m1", needs=("units",))
def clean_unit_mean(c: Ctx) -> Ask | None:
    return Ask(
        f"What is the average {c.col('m1')} in {c.domain.m1.unit}", ("agg", "mean", "m1"), "number"
    )


@template("cleaning", "date-repair", 2, "date", needs=("mixed_dates",))
def clean_dates_month(c: Ctx) -> Ask | None:
    return count_in_a_month(c, "year-month")


@template("cleaning", "timezone-repair", 2, "date", needs=("timezones",))
def clean_timezones_day(c: Ctx) -> Ask | None:
    return count_in_a_month(c, "year-month of the date in UTC")


@template("deduplication", "dedup", 1, "", needs=("duplicates",), composable=False)
def dedup_count(c: Ctx) -> Ask | None:
    return Ask("How many rows are exact copies of an earlier row", ("raw", "duplicates"), "integer")


@template("deduplication", "dedup", 2, "", needs=("duplicates",))
def dedup_records(c: Ctx) -> Ask | None:
    return Ask(
        f"How many distinct {c.entity_plural()} are there once exact duplicate rows are removed",
        ("count",),
        "integer",
    )


@template("deduplication", "dedup", 2, "m1", needs=("duplicates",))
def dedup_total(c: Ctx) -> Ask | None:
    return Ask(
        f"What is the total {c.col('m1')} once exact duplicate rows are removed",
        ("agg", "sum", "m1"),
        "number",
    )
