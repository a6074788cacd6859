"""Line charts, scatter plots, histograms and horizontal bars read from real matplotlib SVGs:
the right figure scores 1.0; wrong data under the right labels, another chart type, a hedge,
the gold values written as text, an unsorted bar chart where sorted was asked and hand-made
files past the size or nesting caps score 0.0."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from analyst_env.verifiers.chart_match import chart_score  # noqa: E402
from analyst_env.verifiers.chart_svg import MAX_DEPTH, read_chart  # noqa: E402

MONTHS = ["2024-01", "2024-02", "2024-03", "2024-04"]
LINE = {"kind": "line", "categories": MONTHS, "values": [10.5, 14.0, 9.25, 20.0]}
POINTS = [[1.5, 20.0], [3.0, 12.5], [7.25, 30.0]]
SCATTER = {"kind": "scatter", "points": POINTS, "xlabel": "price", "ylabel": "units"}
EDGES = [0.0, 25.0, 50.0, 75.0, 100.0]
HIST = {"kind": "histogram", "edges": EDGES, "counts": [3, 0, 12, 5]}


def _svg(draw, fonttype: str = "none") -> str:  # type: ignore[no-untyped-def]
    with plt.rc_context({"svg.fonttype": fonttype}):
        fig, ax = plt.subplots()
        draw(ax)
        buf = io.StringIO()
        fig.savefig(buf, format="svg")
        plt.close(fig)
    return buf.getvalue()


def _hist(ax, counts):  # type: ignore[no-untyped-def]
    ax.hist(EDGES[:-1], bins=EDGES, weights=counts)


def test_each_kind_reads_back_and_scores_one() -> None:
    line = _svg(lambda ax: ax.plot(MONTHS, LINE["values"], marker="o"))
    chart = read_chart(line)
    assert chart is not None and chart.kind == "line" and list(chart.labels) == MONTHS
    assert chart_score(line, LINE) == 1.0

    scatter = _svg(
        lambda ax: (
            ax.scatter([p[0] for p in POINTS][::-1], [p[1] for p in POINTS][::-1]),
            ax.set_xlabel("price"),
            ax.set_ylabel("units"),
        )
    )
    assert chart_score(scatter, SCATTER) == 1.0  # any order of points

    hist = _svg(lambda ax: _hist(ax, HIST["counts"]))
    chart = read_chart(hist)
    assert chart is not None and chart.kind == "histogram"
    assert [round(v, 6) for v in chart.xs] == EDGES
    assert chart_score(hist, HIST) == 1.0

    import pandas as pd

    raw = pd.Series([1.0, 2.0, 60.0, 70.0, 99.0, 100.0])
    counted = {"kind": "histogram", "edges": EDGES, "counts": [2, 0, 2, 2]}
    assert chart_score(_svg(lambda ax: raw.plot.hist(ax=ax, bins=EDGES)), counted) == 1.0

    barh = _svg(lambda ax: (ax.barh(["a", "b", "c"], [3.0, -1.0, 2.0]), ax.invert_yaxis()))
    assert chart_score(barh, {"kind": "barh", "categories": ["a", "b", "c"], "values": [3, -1, 2]})


def test_adversarial_figures_of_each_kind_score_zero() -> None:
    wrong_line = _svg(lambda ax: ax.plot(MONTHS, [10.5, 14.0, 9.25, 21.0]))
    bars_not_line = _svg(lambda ax: ax.bar(MONTHS, LINE["values"]))
    two_lines = _svg(lambda ax: (ax.plot(MONTHS, LINE["values"]), ax.plot(MONTHS, [1, 2, 3, 4])))
    paths_not_text = _svg(lambda ax: ax.plot(MONTHS, LINE["values"]), fonttype="path")
    as_text = _svg(
        lambda ax: (
            ax.plot(MONTHS, [1, 1, 1, 1]),
            [ax.text(0, 1, f"{v}") for v in LINE["values"]],
        )
    )
    for svg in (wrong_line, bars_not_line, two_lines, paths_not_text, as_text):
        assert chart_score(svg, LINE) == 0.0

    moved = [[1.5, 20.0], [3.0, 12.5], [7.25, 33.0]]
    wrong_points = _svg(lambda ax: ax.scatter(*zip(*moved, strict=True)))
    line_not_scatter = _svg(lambda ax: ax.plot(*zip(*POINTS, strict=True)))
    extra_point = _svg(lambda ax: ax.scatter(*zip(*[*POINTS, [2, 2]], strict=True)))
    for svg in (wrong_points, line_not_scatter, extra_point):
        assert chart_score(svg, {**SCATTER, "xlabel": "", "ylabel": ""}) == 0.0

    wrong_counts = _svg(lambda ax: _hist(ax, [3, 1, 12, 5]))
    bars_with_gaps = _svg(lambda ax: ax.bar(EDGES[:-1], HIST["counts"], width=20, align="edge"))
    for svg in (wrong_counts, bars_with_gaps):
        assert chart_score(svg, HIST) == 0.0


def test_sort_order_is_part_of_a_bar_charts_gold() -> None:
    gold = {"categories": ["b", "c", "a"], "values": [9.0, 5.0, 2.0]}  # largest first
    assert chart_score(_svg(lambda ax: ax.bar(["b", "c", "a"], [9.0, 5.0, 2.0])), gold) == 1.0
    assert chart_score(_svg(lambda ax: ax.bar(["a", "b", "c"], [2.0, 9.0, 5.0])), gold) == 0.0


def test_hand_made_files_past_the_caps_are_unreadable() -> None:
    good = _svg(lambda ax: ax.plot(MONTHS, LINE["values"]))
    assert chart_score(good, LINE) == 1.0
    deep = good.replace("</svg>", "<g>" * (MAX_DEPTH + 1) + "</g>" * (MAX_DEPTH + 1) + "</svg>")
    huge = good.replace("</svg>", "<!--" + "x" * 2_000_000 + "--></svg>")
    many = good.replace("</svg>", "<g/>" * 100_001 + "</svg>")
    entity = '<!DOCTYPE svg [<!ENTITY a "b">]>' + good.split("?>", 1)[1]
    for svg in (deep, huge, many, entity):
        assert read_chart(svg) is None
        assert chart_score(svg, LINE) == 0.0
