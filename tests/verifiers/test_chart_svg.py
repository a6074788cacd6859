"""The bar-chart reader scores real matplotlib SVGs from their geometry: the right chart 1.0,
wrong data with right labels, a line instead of bars, a hedge with two series, an empty figure
and a hand-written file whose labels look right but whose bars are elsewhere all 0.0."""

from __future__ import annotations

import io
import re
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from analyst_env.verifiers.chart_match import chart_score  # noqa: E402
from analyst_env.verifiers.chart_svg import read_chart  # noqa: E402

GOLD = {
    "categories": ["North", "South", "East"],
    "values": [120.5, 80.0, 99.25],
    "xlabel": "region",
    "ylabel": "revenue",
}


def _svg(draw) -> str:  # type: ignore[no-untyped-def]
    with plt.rc_context({"svg.fonttype": "none"}):
        fig, ax = plt.subplots()
        draw(ax)
        buf = io.StringIO()
        fig.savefig(buf, format="svg")
        plt.close(fig)
    return buf.getvalue()


def _labels(ax) -> None:  # type: ignore[no-untyped-def]
    ax.set_xlabel("region")
    ax.set_ylabel("revenue")


def test_the_right_bar_chart_scores_one_and_reads_back_its_values() -> None:
    svg = _svg(lambda ax: (ax.bar(GOLD["categories"], GOLD["values"]), _labels(ax)))
    chart = read_chart(svg)
    assert chart is not None
    assert [round(v, 2) for v in chart.ys] == GOLD["values"]
    assert chart_score(svg, GOLD) == 1.0


def test_pandas_plot_bar_with_negative_values_scores_one() -> None:
    import pandas as pd

    gold = {"categories": ["a", "b"], "values": [-3.0, 7.5]}
    svg = _svg(lambda ax: pd.Series(gold["values"], index=gold["categories"]).plot.bar(ax=ax))
    assert chart_score(svg, gold) == 1.0


def test_adversarial_figures_score_zero() -> None:
    wrong_data = _svg(lambda ax: (ax.bar(GOLD["categories"], [120.5, 95.0, 99.25]), _labels(ax)))
    wrong_order = _svg(
        lambda ax: (ax.bar(["South", "North", "East"], [80.0, 120.5, 99.25]), _labels(ax))
    )
    wrong_type = _svg(lambda ax: (ax.plot(GOLD["categories"], GOLD["values"]), _labels(ax)))
    wrong_label = _svg(
        lambda ax: (
            ax.bar(GOLD["categories"], GOLD["values"]),
            ax.set_xlabel("city"),
            ax.set_ylabel("revenue"),
        )
    )
    hedge = _svg(
        lambda ax: (
            ax.bar(GOLD["categories"], GOLD["values"]),
            ax.bar(GOLD["categories"], [1, 2, 3], bottom=GOLD["values"]),
            _labels(ax),
        )
    )
    empty = _svg(lambda ax: None)
    right = _svg(lambda ax: (ax.bar(GOLD["categories"], GOLD["values"]), _labels(ax)))
    svg_bad_x = right.replace('x="57.6"', 'x="five"')  # a tick coordinate that is no number
    for svg in (
        wrong_data,
        wrong_order,
        wrong_type,
        wrong_label,
        hedge,
        empty,
        "",
        "not xml",
        "<svg/>",
        svg_bad_x,
    ):
        assert chart_score(svg, GOLD) == 0.0


def test_an_edited_file_is_read_for_what_it_shows_and_inconsistent_ticks_are_refused() -> None:
    """The reader trusts the drawn geometry against the drawn tick labels, nothing else: ticks
    relabelled consistently make the bars mean what a reader of the figure would see; one tick
    relabelled alone breaks the linear fit and the figure is unreadable (0.0)."""
    svg = _svg(lambda ax: (ax.bar(GOLD["categories"], [60.0, 40.0, 50.0]), _labels(ax)))
    assert chart_score(svg, GOLD) == 0.0
    doubled = svg
    for tick in ("60", "50", "40", "30", "20", "10"):  # descending: no value is relabelled twice
        doubled = doubled.replace(f">{tick}</text>", f">{int(tick) * 2}</text>")
    chart = read_chart(doubled)
    assert chart is not None and [round(v, 6) for v in chart.ys] == [120.0, 80.0, 100.0]
    one_tick = svg.replace(">60</text>", ">120</text>")
    assert read_chart(one_tick) is None
    assert chart_score(one_tick, GOLD) == 0.0


def test_the_registered_scorer_reads_the_saved_figure_and_fails_closed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from analyst_env.task_format import VerifierSpec
    from analyst_env.verifiers.scorers import score
    from analyst_env.verifiers.verdict import VerifyContext

    (tmp_path / "chart.svg").write_text(
        _svg(lambda ax: (ax.bar(GOLD["categories"], GOLD["values"]), _labels(ax)))
    )
    gold = {**GOLD, "figure": "chart.svg"}
    spec = VerifierSpec(name="chart_figure")
    reader = VerifyContext(read_file=lambda name: (tmp_path / name).read_bytes())
    assert score(spec, "", gold, context=reader) == 1.0
    assert score(spec, "", {**gold, "figure": "missing.svg"}, context=reader) == 0.0
    assert score(spec, "a perfect chart, trust me", gold, context=VerifyContext()) == 0.0


def _many_bars(n: int) -> str:
    """A hand-written figure of ``n`` bars of height 10, each under its own tick."""
    background = f'<g id="patch_0"><path d="M 0 0 L {10 * n} 0 L {10 * n} 100 L 0 100 z"/></g>'
    parts = [f'<svg><g id="axes_1">{background}']
    for i in range(n):
        x = 10 * i
        parts.append(
            f'<g id="patch_{i + 1}"><path d="M {x} 100 L {x + 4} 100 L {x + 4} 50 L {x} 50 z"/></g>'
        )
    parts.append('<g id="matplotlib.axis_1">')
    parts += [
        f'<g id="xtick_{i}"><use x="{10 * i + 2}" y="100"/><text>c{i}</text></g>' for i in range(n)
    ]
    parts.append('</g><g id="matplotlib.axis_2">')
    parts.append('<g id="ytick_0"><use x="0" y="100"/><text>0</text></g>')
    parts.append('<g id="ytick_1"><use x="0" y="50"/><text>10</text></g></g></g></svg>')
    return "".join(parts)


def test_thousands_of_bars_under_thousands_of_ticks_are_read_quickly() -> None:
    """Naming each bar by its tick once compared every bar with every tick: 14,000 of each
    (a 2 MB file) cost 12 s of scoring."""
    svg = _many_bars(12_000)
    started = time.monotonic()
    chart = read_chart(svg)
    assert chart is not None and chart.kind == "bar" and len(chart.labels) == 12_000
    assert chart.labels[:2] == ("c0", "c1") and round(chart.ys[-1], 6) == 10.0
    assert chart_score(svg, GOLD) == 0.0
    assert time.monotonic() - started < 5.0  # was 12 s; now parsing the 2 MB file is most of it


def test_bars_coloured_one_by_one_are_one_series_and_a_second_series_still_scores_zero() -> None:
    cats, values = GOLD["categories"], GOLD["values"]
    coloured = _svg(lambda ax: (ax.bar(cats, values, color=["red", "green", "blue"]), _labels(ax)))
    assert chart_score(coloured, GOLD) == 1.0
    for second in ([120.5, 95.0, 99.25], [0.0, 0.0, 0.0], [-1.0, -2.0, -3.0]):
        two = _svg(lambda ax, s=second: (ax.bar(cats, s), ax.bar(cats, values), _labels(ax)))
        assert chart_score(two, GOLD) == 0.0, second


def test_a_tick_moved_to_the_end_of_the_float_range_is_unreadable_not_an_error() -> None:
    """A hand-edited tick at -1e308 overflowed squaring its distance in the tick fit."""
    right = _svg(lambda ax: (ax.scatter([1, 2, 3], [3, 1, 2]), _labels(ax)))
    tick = re.search(r'<g id="xtick_1">.*?<use [^>]*x="([\d.]+)"', right, re.S)
    assert tick is not None
    edited = right[: tick.start(1)] + "-1e308" + right[tick.end(1) :]
    gold = {"kind": "scatter", "points": [[1, 3], [2, 1], [3, 2]]}
    assert chart_score(right, gold) == 1.0
    assert read_chart(edited) is None and chart_score(edited, gold) == 0.0


def test_a_figure_without_its_frame_keeps_its_first_bar() -> None:
    """With the frame off no background is drawn, and the first bar was taken for it: the right
    chart scored 0 and one with a bar too many, drawn first, scored 1."""
    cats, values = GOLD["categories"], GOLD["values"]
    right = _svg(lambda ax: (ax.set_frame_on(False), ax.bar(cats, values), _labels(ax)))
    assert chart_score(right, GOLD) == 1.0
    extra = _svg(
        lambda ax: (ax.set_frame_on(False), ax.bar(["West", *cats], [150.0, *values]), _labels(ax))
    )
    assert chart_score(extra, GOLD) == 0.0
    hidden = _svg(
        lambda ax: (ax.patch.set_visible(False), ax.bar(["West", *cats], [150.0, *values]))
    )
    assert chart_score(hidden, {**GOLD, "xlabel": "", "ylabel": ""}) == 0.0


def test_markers_drawn_without_a_line_are_a_scatter_and_count_as_a_series() -> None:
    """``ax.plot(x, y, "o")`` draws a scatter plot as markers on no line; it was read as nothing,
    so that a right scatter drawn so scored 0 and a second series drawn so beside a line was
    not seen."""
    scatter = {"kind": "scatter", "points": [[1, 3], [2, 1], [3, 2]]}
    assert chart_score(_svg(lambda ax: ax.plot([1, 2, 3], [3, 1, 2], "o")), scatter) == 1.0
    line = {"kind": "line", "categories": ["Jan", "Feb", "Mar"], "values": [3, 1, 2]}
    months = line["categories"]
    assert chart_score(_svg(lambda ax: ax.plot(months, [3, 1, 2], marker="o")), line) == 1.0
    two = _svg(lambda ax: (ax.plot(months, [3, 1, 2]), ax.plot(months, [1, 2, 3], "o")))
    assert chart_score(two, line) == 0.0
    # the line's own markers drawn as a second artist, on its vertices: one series still
    for markers in (
        lambda ax: ax.plot(months, [3, 1, 2], "o"),
        lambda ax: ax.scatter(months, [3, 1, 2]),
    ):
        styled = _svg(lambda ax, markers=markers: (ax.plot(months, [3, 1, 2]), markers(ax)))
        assert chart_score(styled, line) == 1.0
