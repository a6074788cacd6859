"""Scores a chart read from an SVG (:mod:`~analyst_env.verifiers.chart_svg`) against a gold series.

Why: the gold of a chart task is the series the figure must show, not a picture. Its
``kind`` (``bar`` by default, ``barh``, ``line``, ``scatter``, ``histogram``) must be the
kind read from the figure's structure; then:

- ``bar``/``barh``/``line``: ``categories`` in the gold's order (a bar chart asked
  sorted has its gold in that order, so an unsorted one scores 0) and ``values``
  each within ``rel_tol`` of the largest gold value;
- ``scatter``: ``points`` ``[[x, y], ...]`` matched one to one in any order, each
  coordinate within ``rel_tol`` of that coordinate's largest gold magnitude;
- ``histogram``: ``edges`` within ``rel_tol`` of one bin's width and ``counts`` within
  0.25 (counts are whole numbers);

and the axis labels, where the gold names them (``xlabel``, ``ylabel``). One miss is 0.0.

Example:
    >>> chart_score("<svg/>", {"categories": ["a"], "values": [1.0]})
    0.0
"""

from __future__ import annotations

from typing import Any

from analyst_env.verifiers.chart_svg import Chart, read_chart
from analyst_env.verifiers.normalize import close, normalize_text

COUNT_TOL = 0.25


def _near(got: tuple[float, ...], want: list[float], tol: float) -> bool:
    return len(got) == len(want) and all(
        close(g, float(w), abs_tol=tol) for g, w in zip(got, want, strict=True)
    )


def _scale(values: list[float]) -> float:
    return max((abs(float(v)) for v in values), default=0.0) or 1.0


def _series(chart: Chart, gold: dict[str, Any], rel_tol: float) -> bool:
    kind = chart.kind
    if kind in ("bar", "barh", "line"):
        cats = [normalize_text(c) for c in gold["categories"]]
        values = list(gold["values"])
        return [normalize_text(x) for x in chart.labels] == cats and _near(
            chart.ys, values, rel_tol * _scale(values)
        )
    if kind == "histogram":
        edges, counts = list(gold["edges"]), list(gold["counts"])
        width = min((b - a for a, b in zip(edges, edges[1:], strict=False)), default=1.0)
        return _near(chart.xs, edges, rel_tol * abs(width)) and _near(chart.ys, counts, COUNT_TOL)
    points = [(float(x), float(y)) for x, y in gold["points"]]
    if len(points) != len(chart.xs):
        return False
    tx = rel_tol * _scale([x for x, _ in points])
    ty = rel_tol * _scale([y for _, y in points])
    left = list(zip(chart.xs, chart.ys, strict=True))
    for x, y in points:  # one to one: each gold point takes the first unused drawn point
        hit = next(
            (p for p in left if close(p[0], x, abs_tol=tx) and close(p[1], y, abs_tol=ty)), None
        )
        if hit is None:
            return False
        left.remove(hit)
    return True


def chart_score(svg_text: str, gold: dict[str, Any], rel_tol: float = 0.01) -> float:
    """1.0 when the figure in ``svg_text`` is gold's kind of chart with gold's series and axis
    labels (see the module docstring), else 0.0."""
    chart = read_chart(svg_text)
    if chart is None or chart.kind != gold.get("kind", "bar"):
        return 0.0
    try:
        if not _series(chart, gold, rel_tol):
            return 0.0
    except (KeyError, TypeError, ValueError):  # a gold without the kind's series
        return 0.0
    for key, got in (("xlabel", chart.xlabel), ("ylabel", chart.ylabel)):
        if gold.get(key) and normalize_text(got) != normalize_text(gold[key]):
            return 0.0
    return 1.0
