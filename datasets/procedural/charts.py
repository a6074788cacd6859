"""Chart answers of procedural tasks: the gold series, the request and the oracle cell.

A chart template (``t_charts``) asks for one figure; its series is a query both
engines answer (a ``table`` per group or month, or a ``hist`` over stated bin
edges). This module turns the agreed result into the gold ``chart_figure``
scores the saved SVG against (:mod:`analyst_env.verifiers.chart_match`): the
kind, the series in the order asked (a sorted bar chart's gold is sorted, so an
unsorted figure scores 0) and the axis labels the request names. The answer
text is ignored; the oracle is one Python cell that draws the gold series with
matplotlib and saves it.

Text stays text in the SVG only with matplotlib's ``svg.fonttype = 'none'``: the
sandbox's kernels start with it (``envs.kernel.image_specs.apply_mpl_rc``), and the
request says so too, since a task may be run elsewhere (a Harbor export). A series
that cannot be scored fairly is dropped: a tie in a sorted order, labels whose A to
Z order depends on letter case, fewer than two marks, an empty histogram.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from analyst_env.datasets.procedural.templates import Ask, Ctx
from analyst_env.task_format import ToolCall, VerifierSpec

FIGURE = "chart.svg"
VERIFIER = VerifierSpec(name="chart_figure")
KIND_WORDS = {"bar": "bar chart", "line": "line chart", "scatter": "scatter plot"}


@dataclass
class Figure:
    """What a chart task adds to the common parts: its request, gold and oracle cell."""

    request: str
    answer: dict[str, Any]
    oracle_steps: list[ToolCall]


def _series(ask: Ask, result: Any, ctx: Ctx) -> dict[str, Any]:
    """The gold's kind, series and axis labels; ValueError names the drop."""
    kind = ask.what
    if kind == "histogram":
        counts = [int(n) for n in result]
        if not sum(counts):
            raise ValueError("undefined-answer")
        return {"kind": kind, "edges": list(ask.op[2]), "counts": counts}
    rows = [list(r) for r in result]
    if len(rows) < 2:
        raise ValueError("chart-too-few-marks")
    by, roles = ask.op[1], [role for _, role in ask.op[2]]
    if kind == "scatter":
        points = [[float(r[1]), float(r[2])] for r in rows]
        return {"kind": kind, "points": points, "xlabel": roles[0], "ylabel": roles[1]}
    if ask.order == "desc":
        rows.sort(key=lambda r: -float(r[1]))
        rounded = [round(float(r[1]), 9) for r in rows]
        if len(set(rounded)) != len(rounded):
            raise ValueError("chart-order-ambiguous")
    elif [str(r[0]) for r in rows] != sorted((str(r[0]) for r in rows), key=str.casefold):
        raise ValueError("chart-order-ambiguous")  # A to Z must not depend on letter case
    return {
        "kind": kind,
        "categories": [str(r[0]) for r in rows],
        "values": [float(r[1]) for r in rows],
        "xlabel": "date" if by == "month" else by,
        "ylabel": roles[0],
    }


def _draw(gold: dict[str, Any]) -> list[str]:
    kind = gold["kind"]
    if kind == "histogram":
        return [
            f"edges = {gold['edges']!r}",
            f"ax.hist(edges[:-1], bins=edges, weights={gold['counts']!r})",
            "ax.ticklabel_format(style='plain', useOffset=False)",
        ]
    if kind == "scatter":
        xs, ys = zip(*gold["points"], strict=True)
        return [
            f"ax.scatter({list(xs)!r}, {list(ys)!r})",
            "ax.ticklabel_format(style='plain', useOffset=False)",
        ]
    call = "ax.bar" if kind == "bar" else "ax.plot"
    extra = "" if kind == "bar" else ", marker='o'"
    return [
        f"{call}({gold['categories']!r}, {gold['values']!r}{extra})",
        "ax.ticklabel_format(axis='y', style='plain', useOffset=False)",
    ]


def figure(ask: Ask, result: Any, ctx: Ctx) -> Figure:
    """The request, gold and oracle cell of a chart task from the engines' agreed ``result``.

    Raises:
        ValueError: the series cannot be scored fairly (the reason is the drop's name).
    """
    gold = _series(ask, result, ctx)
    for key in ("xlabel", "ylabel"):  # roles to the files' column names
        if key in gold:
            gold[key] = ctx.col(gold[key]).strip("`")
    if gold["kind"] == "histogram":
        gold["xlabel"] = ctx.col("m1").strip("`")
    axes = f"label the x axis `{gold['xlabel']}`" + (
        f" and the y axis `{gold['ylabel']}`" if "ylabel" in gold else ""
    )
    what = KIND_WORDS.get(gold["kind"], "histogram")
    request = (
        f"Draw the {what} as one series with matplotlib (pandas' plotting is fine too), "
        f"{axes}, and save the figure as `{FIGURE}` in the working directory. Keep its text "
        'as text (the matplotlib setting "svg.fonttype" set to "none", which is already the '
        "default here) and its value axes linear with plain numbered ticks (no offset or "
        "scientific notation). The figure itself is checked: its chart type, the values it "
        "draws, their order and its axis labels. Then call final_answer with a short note; "
        "the note is not scored."
    )
    code = "\n".join(
        [
            "import matplotlib.pyplot as plt",
            "with plt.rc_context({'svg.fonttype': 'none'}):",
            "    fig, ax = plt.subplots()",
            *(f"    {line}" for line in _draw(gold)),
            f"    ax.set_xlabel({gold['xlabel']!r})",
            *([f"    ax.set_ylabel({gold['ylabel']!r})"] if "ylabel" in gold else []),
            f"    fig.savefig({FIGURE!r})",
            "    plt.close(fig)",
            f"print('saved', {FIGURE!r})",
        ]
    )
    steps = [ToolCall(tool="add_and_execute_code_cell", arguments={"code": code})]
    return Figure(request, {**gold, "figure": FIGURE}, steps)


__all__ = ["FIGURE", "VERIFIER", "Figure", "figure"]
