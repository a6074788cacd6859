"""Adversarial figures for ``chart_figure`` tasks, for ``analyst-env validate --probe``.

Why: a chart task is scored on a file the agent writes, so the probes are files. Each is
something a policy could try instead of drawing the chart: no file, the gold's numbers
and labels written as SVG text beside a mark that is not the series (labels right, data
absent), text that is not XML, a file past the size cap and one nested past the depth
cap, and the gold itself stated in the answer. All must score 0.
"""

from __future__ import annotations

from html import escape
from typing import Any

from analyst_env.verifiers.chart_svg import MAX_DEPTH, MAX_SVG_CHARS
from analyst_env.verifiers.probe_answers import Probe


def _gold_words(gold: dict[str, Any]) -> list[str]:
    words = [str(gold.get(k, "")) for k in ("xlabel", "ylabel")]
    for key in ("categories", "values", "edges", "counts"):
        words += [str(v) for v in gold.get(key, [])]
    words += [str(c) for p in gold.get("points", []) for c in p]
    return words


def _as_text(gold: dict[str, Any]) -> bytes:
    """An axes with one tick pair and the gold written as ``<text>``, but no series drawn."""
    texts = "".join(
        f'<g id="text_{i + 9}"><text x="10" y="{20 + 12 * i}">{escape(w)}</text></g>'
        for i, w in enumerate(_gold_words(gold))
    )
    tick = '<g id="{0}_{1}"><use x="{2}" y="{3}"/><text>{4}</text></g>'
    axis_x = tick.format("xtick", 1, 60, 300, 0) + tick.format("xtick", 2, 400, 300, 1)
    axis_y = tick.format("ytick", 1, 57, 300, 0) + tick.format("ytick", 2, 57, 40, 1)
    return (
        '<svg xmlns="http://www.w3.org/2000/svg"><g id="axes_1">'
        '<g id="patch_2"><path d="M 57 300 L 414 300 L 414 40 L 57 40 z"/></g>'
        f'<g id="matplotlib.axis_1">{axis_x}</g><g id="matplotlib.axis_2">{axis_y}</g>'
        f"{texts}</g></svg>"
    ).encode()


def chart_probes(gold: dict[str, Any]) -> list[Probe]:
    """Files (and one answer) that must not score on a ``chart_figure`` task with ``gold``."""
    name = str(gold["figure"])
    deep = "<svg>" + "<g>" * (MAX_DEPTH + 5) + "</g>" * (MAX_DEPTH + 5) + "</svg>"
    return [
        Probe("no-file", "done", {}),
        Probe("values-as-text", "done", {name: _as_text(gold)}),
        Probe("not-xml", "done", {name: b"a bar chart of the totals"}),
        Probe("deep-nesting", "done", {name: deep.encode()}),
        Probe("huge", "done", {name: b"<svg>" + b" " * MAX_SVG_CHARS + b"</svg>"}),
        Probe("gold-stated", " ".join(_gold_words(gold)), {}),
    ]
