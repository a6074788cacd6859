"""The coverage numbers docs/tasks.md publishes, computed from the registry and from a sample.

``composed_templates()`` counts templates honestly: a *base template* is one
registered function (its own wording and its own reference computation); a
*composed template* is a base template together with the set of extra filter
kinds composition may add to it (none, one or two of: a ``g1`` value, a ``g2``
value, an ``m2`` threshold, a year, a lookup-table attribute), counted only
where the filter's column is not one the template itself reads and the layout
can hold the lookup table (a template about the file as a whole, such as
counting duplicate rows, takes no filters and counts once). Aggregate
functions, columns, thresholds, domains and layouts are parameters and are not
counted as templates.

``python -m analyst_env.datasets.procedural.coverage [N]`` prints the tables of
docs/tasks.md from N generated tasks (default 2000).
"""

from __future__ import annotations

import collections
import itertools
import sys
from typing import Any

from analyst_env.datasets.procedural.templates import CATEGORIES, load_all

FILTER_KINDS = ("g1", "g2", "m2", "year", "attr")


def composed_templates() -> dict[str, Any]:
    """``{"base": n, "total": n, "by_category": {category: (base, composed)}}``."""
    by_category: dict[str, list[int]] = {c: [0, 0] for c in CATEGORIES}
    for t in load_all():
        free = [k for k in FILTER_KINDS if (k if k != "year" else "date") not in t.uses]
        shapes = sum(1 for n in (0, 1, 2) for _ in itertools.combinations(free, n))
        shapes = shapes if t.composable else 1
        by_category[t.category][0] += 1
        by_category[t.category][1] += shapes
    return {
        "base": sum(b for b, _ in by_category.values()),
        "total": sum(c for _, c in by_category.values()),
        "by_category": {c: tuple(v) for c, v in by_category.items()},
    }


def sample_table(n: int, seed: int = 0) -> str:
    """Markdown: categories x file kinds x levels, counted over tasks 0..n-1 of ``train``."""
    import tempfile

    from analyst_env.datasets.procedural.dataset import ProceduralDataset

    with tempfile.TemporaryDirectory() as tmp:
        ds = ProceduralDataset(seed, cache_dir=tmp, keep_dirs=64)
        cells: collections.Counter[tuple[str, str, str]] = collections.Counter()
        depths: collections.Counter[int] = collections.Counter()
        for i in range(n):
            m = ds.task("train", i).metadata
            cells[(m["category"], m["kind"], m["level"])] += 1
            depths[m["depth"]] += 1
        stats = ds.stats()
    kinds, levels = ("csv", "multi", "sqlite", "excel"), ("easy", "medium", "hard")
    head = "| category | " + " | ".join(f"{k} {lv}" for k in kinds for lv in levels) + " | total |"
    lines = [head, "|" + "---|" * (2 + len(kinds) * len(levels))]
    for c in CATEGORIES:
        row = [cells[(c, k, lv)] for k in kinds for lv in levels]
        lines.append(f"| {c} | " + " | ".join(str(x) for x in row) + f" | {sum(row)} |")
    lines.append("")
    lines.append("| depth | " + " | ".join(str(d) for d in sorted(depths)) + " |")
    lines.append("|---|" + "---|" * len(depths))
    lines.append("| tasks | " + " | ".join(str(depths[d]) for d in sorted(depths)) + " |")
    lines.append("")
    lines.append(
        f"{n} tasks kept from {stats['attempts']} attempts ({stats['dropped']} dropped: "
        + ", ".join(f"{k} {v}" for k, v in stats["by_reason"].items())
        + ")."
    )
    return "\n".join(lines)


def template_table() -> str:
    counts = composed_templates()
    names: dict[str, list[str]] = collections.defaultdict(list)
    for t in load_all():
        names[t.category].append(t.name)
    lines = ["| category | base templates | composed templates | templates |", "|---|---|---|---|"]
    for c in CATEGORIES:
        base, composed = counts["by_category"][c]
        lines.append(f"| {c} | {base} | {composed} | {', '.join(f'`{n}`' for n in names[c])} |")
    lines.append(f"| **total** | **{counts['base']}** | **{counts['total']}** | |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(template_table())
    print()
    print(sample_table(int(sys.argv[1]) if len(sys.argv) > 1 else 2000))
