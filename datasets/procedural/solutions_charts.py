"""Worked solutions whose answer is a figure: the ``charts`` category (``t_charts``).

The series is computed from the tidied records (``solutions``' load and clean cells):
a table per group or month (:func:`solutions_books.table`, a DuckDB GROUP BY in the SQL
style), or the measure's values for a histogram over the edges the instruction lists. It
is drawn with matplotlib as the request says: the kind and order the plan records, the
axes labelled with the files' column names, plain linear ticks, text kept as text, and
saved as ``chart.svg``, which the ``chart_figure`` scorer reads.
"""

from __future__ import annotations

from analyst_env.datasets.procedural.charts import FIGURE
from analyst_env.datasets.procedural.solutions_books import table

_PLAIN = "ax.ticklabel_format({}style='plain', useOffset=False)"


def _draw(plan: dict, sql: bool) -> list[str]:
    c, (name, *a), kind = plan["cols"], plan["query"]["op"], plan["chart"]["kind"]
    if name == "hist":
        return [
            f"edges = {list(a[1])!r}",
            "fig, ax = plt.subplots()",
            f"ax.hist(df[{a[0]!r}].dropna(), bins=edges)",
            _PLAIN.format(""),
            f"ax.set_xlabel({c[a[0]]!r})",
            "ax.set_ylabel('count')",
        ]
    by, ops = a
    x = c["date"] if by == "month" else c[by]
    values = [c[role] for _, role in ops]
    lines = [table(by, ops, [by, *values], sql), "print(table.head(10))"]
    lines.append("fig, ax = plt.subplots()")
    if kind == "scatter":
        return [
            *lines,
            f"ax.scatter(table[{values[0]!r}], table[{values[1]!r}])",
            _PLAIN.format(""),
            f"ax.set_xlabel({values[0]!r})",
            f"ax.set_ylabel({values[1]!r})",
        ]
    if plan["chart"]["order"] == "desc":
        lines.insert(1, f"table = table.sort_values({values[0]!r}, ascending=False)")
    draw = "ax.bar" if kind == "bar" else "ax.plot"
    marker = ", marker='o'" if kind == "line" else ""
    return [
        *lines,
        f"{draw}(table[{by!r}].astype(str), table[{values[0]!r}]{marker})",
        _PLAIN.format("axis='y', "),
        f"ax.set_xlabel({x!r})",
        f"ax.set_ylabel({values[0]!r})",
    ]


def cell(plan: dict, sql: bool = False) -> str | None:
    """The last cell of a chart task's solution (it saves the figure), or None when the plan
    does not say which chart (a plan written before it recorded one)."""
    if plan["style"] != "chart" or not plan.get("chart"):
        return None
    return "\n".join(
        [
            "import matplotlib.pyplot as plt",
            "plt.rcParams['svg.fonttype'] = 'none'  # text stays text in the SVG",
            *_draw(plan, sql),
            f"fig.savefig({FIGURE!r})",
            "plt.close(fig)",
            f"print('saved', {FIGURE!r})",
        ]
    )


__all__ = ["cell"]
