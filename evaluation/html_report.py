"""The HTML report of an eval run: one self-contained file a person can open and read.

Tables (headline numbers, summaries by dataset, file kind, level and category,
failure reasons, every task) and matplotlib plots (reward by level and by
category, turns and tool calls per episode, failure reasons) inlined as PNG
data URIs: nothing is fetched from anywhere, so the file can be mailed or
archived. Every value that came from a model or a dataset is HTML-escaped.
"""

from __future__ import annotations

import base64
import io
from collections import Counter
from html import escape
from typing import Any

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:72rem;color:#1d2430;
padding:0 1rem}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem}
table{border-collapse:collapse;margin:.5rem 0}th,td{border:1px solid #d6dbe3;padding:.25rem .6rem}
th{background:#f2f4f8;text-align:left}td.num{text-align:right;font-variant-numeric:tabular-nums}
.plots{display:flex;flex-wrap:wrap;gap:1rem}
.plots img{width:100%;max-width:34rem;height:auto;border:1px solid #e3e7ee}
.muted{color:#66707f}code{font-size:.9em}
"""


def _png(fig: Any) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


_LEVELS = ("easy", "medium", "hard")


def _facet_order(value: str) -> tuple[int, str]:
    """Levels from easy to hard, then any other value alphabetically."""
    return (_LEVELS.index(value), "") if value in _LEVELS else (len(_LEVELS), value)


def _plots(report: dict[str, Any]) -> list[tuple[str, str]]:
    """(title, data URI) of each plot the report's data allows."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    episodes = report.get("episode_rows") or []
    plots = []

    def bars(
        title: str, labels: list[str], values: list[float], xlabel: str, share: bool = False
    ) -> None:
        fig = Figure(figsize=(6, 0.32 * len(labels) + 1.3))
        ax = fig.subplots()
        ax.barh(labels[::-1], values[::-1], color="#2f6fed", height=0.6)
        if share:
            ax.set_xlim(0, 1)  # a mean reward: the whole scale, so bars compare across plots
        else:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # counts
        ax.set_xlabel(xlabel)
        ax.set_title(title)
        fig.tight_layout()
        plots.append((title, _png(fig)))

    for facet in ("level", "category"):
        groups = (report.get("summary") or {}).get(facet) or {}
        if groups and set(groups) != {"–"}:
            labels = sorted(groups, key=_facet_order)[:25]
            bars(
                f"Mean reward by {facet}",
                labels,
                [groups[k]["mean_reward"] for k in labels],
                "mean reward",
                share=True,
            )

    def histogram(title: str, values: list[int], xlabel: str) -> None:
        fig = Figure(figsize=(6, 2.8))
        ax = fig.subplots()
        top = max(values) if values else 0
        ax.hist(values, bins=range(0, top + 2), color="#5a9e6f", edgecolor="white", align="left")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # turns and calls are whole
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel(xlabel)
        ax.set_ylabel("episodes")
        ax.set_title(title)
        plots.append((title, _png(fig)))

    if episodes:
        histogram("Turns per episode", [int(r.get("turns", 0)) for r in episodes], "turns")
        histogram(
            "Tool calls per episode", [int(r.get("tool_calls", 0)) for r in episodes], "tool calls"
        )
        used: Counter[str] = Counter()
        for row in episodes:
            used.update(row.get("tools") or {})
        if used:
            top = used.most_common(15)
            bars("Calls per tool", [k for k, _ in top], [v for _, v in top], "calls")
    failures = report.get("failures") or {}
    if failures:
        bars("Failure reasons", list(failures), list(failures.values()), "episodes")
    return plots


def _table(head: list[str], rows: list[list[Any]]) -> str:
    def cell(value: Any) -> str:
        if isinstance(value, float):
            return f'<td class="num">{value:.3f}</td>'
        if isinstance(value, int):
            return f'<td class="num">{value}</td>'
        return f"<td>{escape(str(value if value is not None else ''))}</td>"

    header = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(cell(v) for v in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>"


def render_html(report: dict[str, Any]) -> str:
    """The whole report page for a :func:`.report.build_report` report."""
    model = report.get("model") or {}
    who = model.get("name") or report.get("policy") or "?"
    tokens = report.get("tokens") or {}
    pass_k = report.get("pass_at_k") or {}
    headline: list[list[Any]] = [
        ["dataset", report.get("dataset")],
        ["policy / model", who],
        ["endpoint", model.get("url") or "–"],
        ["tool format", model.get("tool_format") or "–"],
        [
            "sampling",
            ", ".join(f"{k}={v}" for k, v in (report.get("sampling") or {}).items())
            or "endpoint defaults",
        ],
        ["tasks", report.get("n", 0)],
        ["samples per task", report.get("samples", 1)],
        ["episodes", report.get("episodes", 0)],
        ["complete", str(report.get("complete"))],
        ["mean reward", float(report.get("mean_reward", 0.0))],
        ["accuracy (reward ≥ 1)", float(report.get("accuracy", 0.0))],
        *[[f"pass@{k}", float(v)] for k, v in pass_k.items()],
        ["episodes with errors", report.get("errors", 0)],
        [
            "tokens (prompt / completion)",
            f"{tokens.get('prompt', 0):,} / {tokens.get('completion', 0):,}",
        ],
    ]
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>eval {escape(str(report.get('run_id') or ''))}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>Eval: {escape(str(who))} on {escape(str(report.get('dataset')))}</h1>",
        f"<p class='muted'>run <code>{escape(str(report.get('run_id') or ''))}</code></p>",
        _table(["", ""], headline),
    ]
    for facet, groups in (report.get("summary") or {}).items():
        rows = [
            [value, g["tasks"], g["episodes"], g["mean_reward"], g["accuracy"]]
            for value, g in sorted(groups.items(), key=lambda item: _facet_order(item[0]))
        ]
        parts += [
            f"<h2>By {escape(facet)}</h2>",
            _table([facet, "tasks", "episodes", "mean reward", "accuracy"], rows),
        ]
    failures = report.get("failures") or {}
    if failures:
        parts += [
            "<h2>Failure reasons</h2>",
            _table(["reason", "episodes"], [[k, v] for k, v in failures.items()]),
        ]
    plots = _plots(report)
    if plots:
        parts.append("<h2>Plots</h2><div class='plots'>")
        parts += [f"<img alt='{escape(title)}' src='{uri}'>" for title, uri in plots]
        parts.append("</div>")
    task_rows = [
        [
            t["task_id"],
            t.get("level"),
            t.get("category"),
            t["reward"],
            t["solved"],
            t["samples"],
            ", ".join(t.get("failures") or []),
            (t.get("error") or "")[:200],
        ]
        for t in report.get("tasks") or []
    ]
    parts += [
        "<h2>Tasks</h2>",
        _table(
            ["task", "level", "category", "mean reward", "solved", "samples", "failures", "error"],
            task_rows,
        ),
        "</body></html>",
    ]
    return "\n".join(parts)
