"""Reads a bar chart out of a matplotlib SVG file's structure, and scores it against gold.

Why: a chart task is verified from what the figure draws, not from a picture and not from
anything the agent says about it. Matplotlib's SVG backend (with ``svg.fonttype = 'none'``)
writes each axes as ``<g id="axes_N">``, each bar as a rectangular ``<g id="patch_N">``
path, and each tick as a ``<use>`` marker beside a ``<text>`` label. This module maps bar
tops from pixels to data with the tick labels themselves (a least-squares fit over the
y ticks), so a file whose labels say the right thing but whose bars are drawn elsewhere
reads as the wrong data. It trusts nothing but that geometry: no gid, title or metadata
claim counts. Parsing uses :mod:`xml.etree.ElementTree` on text capped in size; a figure
it cannot read is simply wrong (0.0), never an error.

Example:
    >>> chart_score("<svg/>", {"categories": ["a"], "values": [1.0]})
    0.0
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from analyst_env.verifiers.normalize import close, normalize_text, parse_number

MAX_SVG_CHARS = 2_000_000
_NUM = re.compile(r"-?\d+(?:\.\d+)?(?:e-?\d+)?")


@dataclass(frozen=True)
class BarChart:
    """What one axes draws: bars as (category label, value, fill), and the axis labels."""

    bars: tuple[tuple[str, float, str], ...]
    xlabel: str
    ylabel: str


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _texts(group: ET.Element) -> list[ET.Element]:
    return [e for e in group.iter() if _local(e.tag) == "text"]


def _tick_points(axis: ET.Element, prefix: str) -> list[tuple[float, float, str]]:
    """(x, y, label) of every tick marker in one ``matplotlib.axis_N`` group."""
    out = []
    for tick in axis:
        if not tick.get("id", "").startswith(prefix):
            continue
        uses = [e for e in tick.iter() if _local(e.tag) == "use"]
        texts = _texts(tick)
        if uses and texts:
            out.append(
                (
                    float(uses[0].get("x", "nan")),
                    float(uses[0].get("y", "nan")),
                    "".join(texts[0].itertext()),
                )
            )
    return out


def _rectangle(path_d: str) -> tuple[float, float, float, float] | None:
    nums = [float(n) for n in _NUM.findall(path_d)]
    if len(nums) != 8 or not path_d.rstrip().endswith("z"):
        return None
    xs, ys = nums[0::2], nums[1::2]
    return min(xs), max(xs), min(ys), max(ys)


def read_bar_chart(svg_text: str) -> BarChart | None:
    """The bar chart in the only axes of ``svg_text``, or None if it is not exactly that."""
    if len(svg_text) > MAX_SVG_CHARS or "<!ENTITY" in svg_text:
        return None
    try:
        return _read(ET.fromstring(svg_text))
    except (ET.ParseError, ValueError):  # not XML, or a coordinate that is not a number
        return None


def _read(root: ET.Element) -> BarChart | None:
    axes = [
        g
        for g in root.iter()
        if _local(g.tag) == "g" and re.fullmatch(r"axes_\d+", g.get("id", ""))
    ]
    if len(axes) != 1:
        return None
    ax = axes[0]
    axis_groups = [g for g in ax if g.get("id", "").startswith("matplotlib.axis_")]
    if len(axis_groups) != 2:
        return None
    xticks, yticks = _tick_points(axis_groups[0], "xtick_"), _tick_points(axis_groups[1], "ytick_")
    ymap = _fit([(y, parse_number(label.replace("\u2212", "-"))) for _, y, label in yticks])
    if ymap is None or not xticks:
        return None
    xlabel = _axis_label(axis_groups[0])
    ylabel = _axis_label(axis_groups[1])
    patches = [g for g in ax if g.get("id", "").startswith("patch_")]
    bars = []
    for patch in patches[1:]:  # the first patch is the axes background
        paths = [e for e in patch if _local(e.tag) == "path"]
        rect = _rectangle(paths[0].get("d", "")) if paths else None
        if rect is None:
            continue  # spines are two-point lines
        x0, x1, y_top, y_bottom = rect
        centre = (x0 + x1) / 2
        label = min(xticks, key=lambda t: abs(t[0] - centre))[2]
        near, far = sorted((ymap(y_top), ymap(y_bottom)), key=abs)
        height = far - near  # signed: a bar below zero reads negative
        fill = re.search(r"fill:\s*([^;\"]+)", paths[0].get("style", ""))
        bars.append((label, height, fill.group(1).strip() if fill else ""))
    if not bars:
        return None
    return BarChart(tuple(bars), xlabel, ylabel)


def _axis_label(axis: ET.Element) -> str:
    direct = [g for g in axis if g.get("id", "").startswith("text_")]
    return "".join(direct[-1].itertext()).strip() if direct else ""


def _fit(points: list[tuple[float, float | None]]) -> Callable[[float], float] | None:
    """pixel -> value as a least-squares line through the labelled ticks (None if < 2)."""
    pts = [(p, v) for p, v in points if v is not None]
    if len(pts) < 2:
        return None
    n = len(pts)
    mp = sum(p for p, _ in pts) / n
    mv = sum(v for _, v in pts) / n
    var = sum((p - mp) ** 2 for p, _ in pts)
    if var == 0:
        return None
    slope = sum((p - mp) * (v - mv) for p, v in pts) / var
    if any(abs(mv + slope * (p - mp) - v) > 1e-6 * max(1.0, abs(v)) for p, v in pts):
        return None  # non-linear (log) or inconsistent tick labels
    return lambda p: mv + slope * (p - mp)


def chart_score(svg_text: str, gold: dict[str, Any], rel_tol: float = 0.01) -> float:
    """1.0 when the figure is one bar series with gold's categories, in gold's order, with
    gold's values (within ``rel_tol`` of the largest), and, if gold names them, its axis labels."""
    chart = read_bar_chart(svg_text)
    if chart is None or len({fill for *_, fill in chart.bars}) != 1:
        return 0.0  # unreadable, or several series (a hedge)
    cats = [normalize_text(c) for c in gold["categories"]]
    if [normalize_text(label) for label, _, _ in chart.bars] != cats:
        return 0.0
    scale = max(abs(v) for v in gold["values"]) or 1.0
    if not all(
        close(got, want, abs_tol=rel_tol * scale)
        for (_, got, _), want in zip(chart.bars, gold["values"], strict=True)
    ):
        return 0.0
    for key, got in (("xlabel", chart.xlabel), ("ylabel", chart.ylabel)):
        if gold.get(key) and normalize_text(got) != normalize_text(gold[key]):
            return 0.0
    return 1.0
