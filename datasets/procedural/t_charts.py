"""Chart templates: a figure saved as SVG, verified from what it draws (``charts``).

Each asks for one chart of one series: a bar chart (sorted by value, or A to Z), a
line chart over the months, a scatter plot of two averages per group, or a
histogram over stated bin edges. The series is an ordinary query (``table`` or
``hist``) answered by both engines; ``charts`` turns it into the gold the
``chart_figure`` scorer reads the saved figure against, the request and the
oracle cell.
"""

from __future__ import annotations

import math

from analyst_env.datasets.procedural.templates import Ask, Ctx, template

NICE_STEPS = (1.0, 2.0, 2.5, 5.0)


def _bar_chart(name: str, fn: str, by: str, role: str, order: str) -> None:
    """Register a bar chart of the ``fn`` of ``role`` per ``by`` value; ``order`` is ``desc``
    (bars from the largest value) or ``label`` (A to Z)."""

    def build(c: Ctx) -> Ask | None:
        word = {"sum": "total", "mean": "average"}[fn]
        sorted_by = (
            f"the bars sorted from the largest {word} to the smallest"
            if order == "desc"
            else f"the bars in A to Z order of {c.col(by)}"
        )
        return Ask(
            f"Make a bar chart of the {word} {c.col(role)} per {c.col(by)} value, one bar per "
            f"value, {sorted_by}",
            ("table", by, ((fn, role),)),
            "chart",
            what="bar",
            order=order,
        )

    template("charts", "chart-bar", 2, f"{by} {role}", name=name)(build)


_bar_chart("chart_bar_sorted", "sum", "g1", "m1", "desc")
_bar_chart("chart_bar_average", "mean", "g2", "m2", "label")


@template("charts", "chart-line", 2, "date m1")
def chart_line_monthly(c: Ctx) -> Ask | None:
    if len(c.months()) < 3:
        return None
    return Ask(
        f"Make a line chart of the total {c.col('m1')} per calendar month of {c.col('date')}: "
        "one point per month that has records, in time order, each labelled on the x axis "
        "with its month written as text YYYY-MM",
        ("table", "month", (("sum", "m1"),)),
        "chart",
        what="line",
    )


@template("charts", "chart-scatter", 2, "g1 m1 m2")
def chart_scatter_averages(c: Ctx) -> Ask | None:
    return Ask(
        f"Make a scatter plot with one point per {c.col('g1')} value: the average "
        f"{c.col('m1')} of its {c.entity_plural()} on the x axis and their average "
        f"{c.col('m2')} on the y axis",
        ("table", "g1", (("mean", "m1"), ("mean", "m2"))),
        "chart",
        what="scatter",
    )


def bin_edges(low: float, high: float, bins: int) -> list[float] | None:
    """Equal bins of a round width (1, 2, 2.5 or 5 times a power of ten) from a multiple of
    the width at or below ``low`` to the first edge at or above ``high``."""
    if not high > low:
        return None
    raw = (high - low) / bins
    power = 10.0 ** math.floor(math.log10(raw))
    width = next(s * power for s in (*NICE_STEPS, 10.0) if s * power >= raw)
    start = math.floor(low / width) * width
    count = math.ceil((high - start) / width - 1e-9)
    edges = [round(start + i * width, 9) for i in range(count + 1)]
    return edges if edges[-1] >= high and 3 <= count <= 12 else None


@template("charts", "chart-hist", 2, "m1")
def chart_histogram(c: Ctx) -> Ask | None:
    values = c.records["m1"].dropna()
    edges = bin_edges(float(values.min()), float(values.max()), int(c.rng.integers(4, 9)))
    if edges is None:
        return None
    shown = [f"{e:.10g}" for e in edges]
    listed = ", ".join(shown[:-1]) + f" and {shown[-1]}"
    return Ask(
        f"Make a histogram of {c.col('m1')} over the {c.entity_plural()} with the bin edges "
        f"{listed} (a bin holds its lower edge; the last bin holds {shown[-1]} too)",
        ("hist", "m1", tuple(edges)),
        "chart",
        what="histogram",
    )
