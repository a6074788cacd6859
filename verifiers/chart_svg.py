"""Reads a chart out of a matplotlib SVG file's structure: its type, its series, its axis labels.

Why: a chart task is verified from what the figure draws, not from a picture and not from
anything the agent says about it. Matplotlib's SVG backend (with ``svg.fonttype = 'none'``,
so text stays text) writes each axes as ``<g id="axes_N">``, each bar or histogram bin as a
rectangular ``<g id="patch_N">`` path, each plotted line as a ``<g id="line2d_N">`` path,
each scatter as a ``<g id="PathCollection_N">`` of ``<use>`` markers, and each tick as a
``<use>`` marker beside a ``<text>`` label. This module maps pixels to data with the tick
labels themselves (a least-squares line through the labelled ticks, refused unless every
tick lies on it), so a file whose labels say the right thing but whose marks are drawn
elsewhere reads as the wrong data. The chart type comes from that structure alone:

- rectangles sharing one baseline edge: ``bar`` (gaps between them) or ``histogram``
  (each bin's right edge the next one's left edge, on a numeric x axis); rectangles
  sharing one left edge: ``barh``;
- exactly one line: ``line``, each vertex named by the x tick at its position;
- exactly one set of markers: ``scatter``, both coordinates through the ticks (a marker
  collection, ``ax.scatter``, or a line of markers alone, ``ax.plot(x, y, "o")``; markers on a
  line are that line's, and so are markers drawn apart on exactly its vertices).

Anything else (two series, bars and a line, no marks, a log axis, a vertex with no tick)
is unreadable. It trusts nothing but geometry: no gid, title or metadata claim counts.
Parsing is capped (characters, elements, nesting depth, no entity declarations); a figure
it cannot read is simply wrong (0.0 in :mod:`~analyst_env.verifiers.chart_match`), never
an error.

Example:
    >>> read_chart("<svg/>") is None
    True
"""

from __future__ import annotations

import bisect
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass

from analyst_env.verifiers.normalize import parse_number

MAX_SVG_CHARS = 2_000_000
MAX_ELEMENTS = 100_000
MAX_DEPTH = 40
_NUM = re.compile(r"-?\d+(?:\.\d+)?(?:e-?\d+)?")
_EDGE = 1e-3  # pixels: two edges this close are the same edge (the SVG writes 6 digits)

Fit = Callable[[float], float]


@dataclass(frozen=True)
class Chart:
    """What the only axes of a figure draws.

    ``labels`` name each bar (left to right; ``barh``: top to bottom) or line vertex;
    ``xs`` are scatter x values or a histogram's bin edges; ``ys`` are bar values,
    line values, scatter y values or bin counts.
    """

    kind: str
    labels: tuple[str, ...]
    xs: tuple[float, ...]
    ys: tuple[float, ...]
    xlabel: str
    ylabel: str


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def parse_capped(svg_text: str) -> ET.Element | None:
    """The parsed root, or None past the caps (size, element count, depth) or on bad XML."""
    if len(svg_text) > MAX_SVG_CHARS or "<!ENTITY" in svg_text:
        return None
    parser: ET.XMLPullParser = ET.XMLPullParser(events=("start", "end"))
    depth = count = 0
    root: ET.Element | None = None
    try:
        parser.feed(svg_text)
        parser.close()
        for event, element in parser.read_events():  # type: ignore[misc]  # (event, element)
            if root is None and isinstance(element, ET.Element):
                root = element
            depth += 1 if event == "start" else -1
            count += event == "start"
            if depth > MAX_DEPTH or count > MAX_ELEMENTS:
                return None
    except ET.ParseError:
        return None
    return root


def read_chart(svg_text: str) -> Chart | None:
    """The chart in the only axes of ``svg_text``, or None unless it is one readable chart."""
    root = parse_capped(svg_text)
    if root is None:
        return None
    try:
        return _read(root)
    except (ValueError, ArithmeticError):  # a coordinate that is no number, or near 1e308
        return None


def _direct(group: ET.Element, prefix: str) -> list[ET.Element]:
    return [g for g in group if g.get("id", "").startswith(prefix)]


def _read(root: ET.Element) -> Chart | None:
    axes = [
        g
        for g in root.iter()
        if _local(g.tag) == "g" and re.fullmatch(r"axes_\d+", g.get("id", ""))
    ]
    if len(axes) != 1:
        return None
    ax = axes[0]
    axis_groups = _direct(ax, "matplotlib.axis_")
    if len(axis_groups) != 2:
        return None
    ticks = _tick_points(axis_groups[0], "xtick_"), _tick_points(axis_groups[1], "ytick_")
    labels = _axis_label(axis_groups[0]), _axis_label(axis_groups[1])
    rects = [r for r in map(_patch_rect, _direct(ax, "patch_")) if r is not None]
    if rects and _covers_ticks(rects[0], ticks):
        rects = rects[1:]  # the axes' background, drawn first (absent with the frame off)
    line_groups = _direct(ax, "line2d_")
    lines = [p for p in map(_line_points, line_groups) if p]
    marks = [p for p in map(_use_points, _direct(ax, "PathCollection_")) if p]
    marks += [p for g in line_groups if not _line_points(g) and (p := _use_points(g))]
    marks = [p for p in marks if not any(_on_vertices(p, line) for line in lines)]
    if sum(map(bool, (rects, lines, marks))) != 1 or len(lines) > 1 or len(marks) > 1:
        return None  # nothing drawn, or several series or kinds at once (a hedge)
    if rects:
        return _bars(rects, ticks, labels)
    if lines:
        return _line(lines[0], ticks, labels)
    return _scatter(marks[0], ticks, labels)


def _covers_ticks(rect: tuple[float, float, float, float], ticks: Ticks) -> bool:
    """Whether ``rect`` holds every tick of both axes (on its edges): the axes' background,
    not a bar. Taking the first patch for the background by its place alone dropped the first
    bar of a figure drawn with its frame off (``ax.set_frame_on(False)``), so that a bar too
    many, drawn first, passed."""
    left, right, top, bottom = rect
    return all(
        left - _EDGE <= x <= right + _EDGE and top - _EDGE <= y <= bottom + _EDGE
        for x, y, _ in (*ticks[0], *ticks[1])
    )


def _tick_points(axis: ET.Element, prefix: str) -> list[tuple[float, float, str]]:
    """(x, y, label) of every tick marker in one ``matplotlib.axis_N`` group."""
    out = []
    for tick in _direct(axis, prefix):
        uses = [e for e in tick.iter() if _local(e.tag) == "use"]
        texts = [e for e in tick.iter() if _local(e.tag) == "text"]
        if uses and texts:
            x, y = float(uses[0].get("x", "nan")), float(uses[0].get("y", "nan"))
            out.append((x, y, "".join(texts[0].itertext()).strip()))
    return out


def _axis_label(axis: ET.Element) -> str:
    direct = _direct(axis, "text_")
    return "".join(direct[-1].itertext()).strip() if direct else ""


def _patch_rect(patch: ET.Element) -> tuple[float, float, float, float] | None:
    """(left, right, top, bottom) of a closed rectangular patch (spines are not). Its colour is
    not read: bars coloured one by one (``color=[...]``) are one series still, and two series of
    bars can only pass as one by drawing more bars than the gold has categories."""
    paths = [e for e in patch if _local(e.tag) == "path"]
    if not paths:
        return None
    d = paths[0].get("d", "")
    nums = [float(n) for n in _NUM.findall(d)]
    if len(nums) != 8 or not d.rstrip().endswith("z"):
        return None
    xs, ys = nums[0::2], nums[1::2]
    return min(xs), max(xs), min(ys), max(ys)


def _line_points(group: ET.Element) -> list[tuple[float, float]]:
    paths = [e for e in group if _local(e.tag) == "path"]
    if not paths:
        return []
    nums = [float(n) for n in _NUM.findall(paths[0].get("d", ""))]
    points = list(zip(nums[0::2], nums[1::2], strict=False))
    return points if len(points) >= 2 else []


def _on_vertices(marks: list[tuple[float, float]], line: list[tuple[float, float]]) -> bool:
    """Whether markers sit exactly on a line's vertices, one on each: the line's own markers
    drawn as a second artist (``ax.plot(x, y); ax.plot(x, y, "o")``), no second series."""

    def spots(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
        return sorted((round(x, 2), round(y, 2)) for x, y in points)

    return spots(marks) == spots(line)


def _use_points(group: ET.Element) -> list[tuple[float, float]]:
    return [
        (float(e.get("x", "nan")), float(e.get("y", "nan")))
        for e in group.iter()
        if _local(e.tag) == "use"
    ]


def _fit(points: list[tuple[float, str]]) -> Fit | None:
    """pixel -> value as a least-squares line through the labelled ticks (None if < 2)."""
    parsed = [(p, parse_number(s.replace("\u2212", "-"))) for p, s in points]
    pts = [(p, v) for p, v in parsed if v is not None]
    if len(pts) < 2 or len(pts) != len(points):
        return None  # a tick that is no number: not a numeric axis
    n = len(pts)
    mp = sum(p for p, _ in pts) / n
    mv = sum(v for _, v in pts) / n
    var = sum((p - mp) ** 2 for p, _ in pts)
    if var == 0:
        return None
    slope = sum((p - mp) * (v - mv) for p, v in pts) / var
    span = max(v for _, v in pts) - min(v for _, v in pts)
    if any(abs(mv + slope * (p - mp) - v) > 1e-6 * span for p, v in pts):
        return None  # non-linear (log) or inconsistent tick labels (pixels have 6 decimals)
    return lambda p: mv + slope * (p - mp)


Ticks = tuple[list[tuple[float, float, str]], list[tuple[float, float, str]]]


def _common(edges: list[tuple[float, float]], fit: Fit | None) -> float | None:
    """The edge every (low, high) pair shares (the baseline), if any; a lone bar's is the
    edge whose value is nearer 0."""
    shared = [c for c in edges[0] if all(min(abs(a - c), abs(b - c)) < _EDGE for a, b in edges)]
    if len(shared) == 2 and fit is not None:
        return min(shared, key=lambda c: abs(fit(c)))
    return shared[0] if shared else None


def _bars(rects: list, ticks: Ticks, labels: tuple[str, str]) -> Chart | None:
    xticks, yticks = ticks
    yfit = _fit([(y, s) for _, y, s in yticks])
    xfit = _fit([(x, s) for x, _, s in xticks])
    base_y = _common([(r[2], r[3]) for r in rects], yfit)
    if base_y is not None:
        if yfit is None:
            return None
        rects = sorted(rects, key=lambda r: r[0])
        values = tuple(
            yfit(r[2] if abs(r[3] - base_y) < _EDGE else r[3]) - yfit(base_y) for r in rects
        )
        joined = all(abs(a[1] - b[0]) < _EDGE for a, b in zip(rects, rects[1:], strict=False))
        if len(rects) > 1 and joined and xfit is not None:
            edges = (*(xfit(r[0]) for r in rects), xfit(rects[-1][1]))
            return Chart("histogram", (), edges, values, *labels)
        names = _names([((r[0] + r[1]) / 2, (r[1] - r[0]) / 2) for r in rects], xticks, 0)
        return None if names is None else Chart("bar", names, (), values, *labels)
    base_x = _common([(r[0], r[1]) for r in rects], xfit)
    if base_x is None or xfit is None:
        return None
    rects = sorted(rects, key=lambda r: r[2])  # top to bottom
    values = tuple(xfit(r[1] if abs(r[0] - base_x) < _EDGE else r[0]) - xfit(base_x) for r in rects)
    names = _names([((r[2] + r[3]) / 2, (r[3] - r[2]) / 2) for r in rects], yticks, 1)
    return None if names is None else Chart("barh", names, (), values, *labels)


def _names(
    centres: list[tuple[float, float]], ticks: list[tuple[float, float, str]], axis: int
) -> tuple[str, ...] | None:
    """The tick label at each (centre, half-width) mark; None if a mark has no tick on it, or
    several. The ticks are sorted once and searched, so thousands of bars over thousands of
    ticks cost no product of the two."""
    placed = sorted(((t[axis], t[2]) for t in ticks if t[axis] == t[axis]), key=lambda t: t[0])
    positions = [p for p, _ in placed]
    out = []
    for centre, half in centres:
        low = bisect.bisect_left(positions, centre - half)
        if bisect.bisect_right(positions, centre + half) - low != 1:
            return None
        out.append(placed[low][1])
    return tuple(out)


def _line(points: list, ticks: Ticks, labels: tuple[str, str]) -> Chart | None:
    xticks, yticks = ticks
    yfit = _fit([(y, s) for _, y, s in yticks])
    names = _names([(x, 0.5) for x, _ in points], xticks, 0)
    if yfit is None or names is None:
        return None
    return Chart("line", names, (), tuple(yfit(y) for _, y in points), *labels)


def _scatter(points: list, ticks: Ticks, labels: tuple[str, str]) -> Chart | None:
    xticks, yticks = ticks
    xfit = _fit([(x, s) for x, _, s in xticks])
    yfit = _fit([(y, s) for _, y, s in yticks])
    if xfit is None or yfit is None:
        return None
    return Chart(
        "scatter", (), tuple(xfit(x) for x, _ in points), tuple(yfit(y) for _, y in points), *labels
    )
