"""The ``chart_figure`` scorer: the chart the agent saved as SVG, read from the episode.

Why: the answer text of a chart task is ignored; the figure file is fetched by the server
through ``VerifyContext.read_file`` (the same route the workbook scorer uses, run outside
the agent's sandbox) and read by :mod:`~analyst_env.verifiers.chart_svg` and scored by
:mod:`~analyst_env.verifiers.chart_match`. With no way to
read the episode's files (offline scoring) the reward is 0.0: a chart is never taken on
the agent's word.
"""

from __future__ import annotations

from typing import Any

from analyst_env.verifiers.chart_match import chart_score
from analyst_env.verifiers.chart_svg import MAX_SVG_CHARS
from analyst_env.verifiers.verdict import Verdict, VerifyContext


def chart_figure(
    submitted: str, gold: Any, *, context: VerifyContext, rel_tol: float = 0.01
) -> Verdict:
    """1.0 iff the SVG named in ``gold["figure"]`` is gold's kind of chart (bar, barh, line,
    scatter, histogram) drawing gold's series (within ``rel_tol``) with gold's axis labels.

    Args:
        submitted: The final answer (ignored).
        gold: ``{"figure": path in the working directory, "kind", the kind's series
            ("categories" and "values", "points", or "edges" and "counts"), "xlabel",
            "ylabel"}``.
        context: Gives ``read_file`` for the episode's files.
        rel_tol: Tolerance on each bar, as a fraction of the largest gold value.
    """
    if context.read_file is None:
        return Verdict(0.0, detail="chart not scored: the episode's files cannot be read")
    try:
        raw = context.read_file(str(gold["figure"]))
    except (FileNotFoundError, OSError):
        return Verdict(0.0, detail=f"no figure saved at {gold['figure']}")
    if len(raw) > MAX_SVG_CHARS:
        return Verdict(0.0, detail="figure too large to read")
    reward = chart_score(raw.decode("utf-8", "replace"), gold, rel_tol=rel_tol)
    detail = "figure matches" if reward else "figure is not the requested chart"
    return Verdict(reward, {"figure": reward}, detail)
