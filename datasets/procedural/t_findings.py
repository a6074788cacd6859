"""Findings templates: an open question whose answer is a short written finding (``findings``)."""

from __future__ import annotations

from analyst_env.datasets.procedural.templates import Ask, Ctx, template


@template("findings", "finding", 3, "date m1 g1", composable=False)
def finding_growth_leader(c: Ctx) -> Ask | None:
    pair = c.consecutive_months()
    if pair is None:
        return None
    a, b = pair
    return Ask(
        f"{c.totals_per('month')}: did the total rise or fall "
        f"from {a} to {b}, and by what percentage? And which {c.col('g1')} has the highest "
        f"total {c.col('m1')}",
        ("finding", ("growth", a, b), ("group", "g1", "sum", "m1", ("argmax",))),
        "finding",
    )
