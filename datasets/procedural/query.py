"""The language templates speak: a query over one task's cleaned records, with a fixed meaning.

A query is ``{"filters": [...], "op": (name, *args)}`` over records whose
columns are called by role (``id``, ``date``, ``g1``, ``g2``, ``key``, ``m1``,
``m2``, ``attr``; see ``domains``). Two engines give it the same meaning
independently, ``engine_pandas`` and ``engine_plain``; a task is kept only if
they agree. The rules below are also what the question's wording promises:

- a filter keeps rows that satisfy it; a missing value satisfies no comparison;
- ``attr`` comes from the lookup table by ``key``; a query that uses ``attr``
  keeps only rows whose key is in the lookup table (an inner join);
- aggregates skip missing values; ``count`` counts rows; ``std`` is the sample
  standard deviation (n - 1); percentiles interpolate linearly between the
  closest ranks (numpy's default);
- a result that ties (two labels share the top value) or is empty is
  undefined, and the task is dropped;
- a ``table`` (a sheet of a workbook answer) has one row per group label,
  sorted by label, and one column per aggregate; a ``pivot_table`` has one row
  per ``g1`` label, one column per ``g2`` label (0 where no record has both)
  and a ``Total`` column; a cell no value defines makes the table undefined;
- a ``hist`` counts a measure's values per bin of given edges: a bin holds its
  lower edge, the last bin its upper edge too (numpy's and matplotlib's rule).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Query = dict[str, Any]

AGG_FNS = ("count", "sum", "mean", "min", "max", "median", "std", "nunique")
GROUP_BYS = ("g1", "g2", "attr", "month", "quarter", "pivot")
REDUCERS = ("argmax", "argmin", "top", "bottom", "kth", "value", "share", "count_above", "spread")


def table_rows(columns: Sequence[Mapping[str, float | None]]) -> list[list] | None:
    """The rows of a ``table`` from each aggregate's ``{label: value}``: sorted by label."""
    labels = sorted(set().union(*columns))
    rows = [[label, *(c.get(label) for c in columns)] for label in labels]
    return rows if rows and all(_defined(v) for r in rows for v in r[1:]) else None


def pivot_rows(cells: Mapping[str, float | None]) -> list[list] | None:
    """The rows of a ``pivot_table`` from ``{"g1|g2": value}``: label, one value per g2, total.

    The first row names the columns (``""``, the g2 labels, ``"Total"``).
    """
    if not cells or not all(_defined(v) for v in cells.values()):
        return None
    pairs = {tuple(k.split("|", 1)): float(v or 0.0) for k, v in cells.items()}
    rows_, cols = sorted({r for r, _ in pairs}), sorted({c for _, c in pairs})
    out = []
    for r in rows_:
        values = [float(pairs.get((r, c), 0.0)) for c in cols]
        out.append([r, *values, sum(values)])
    return [["", *cols, "Total"], *out]


def _defined(v: object) -> bool:
    return v is not None and v == v  # NaN is the one value unequal to itself


def uses_attr(q: Query) -> bool:
    """Whether the query needs the lookup table (and so drops rows with unknown keys)."""
    return any(f[0] == "attr" for f in q["filters"]) or "attr" in q["op"]


def percentile_linear(sorted_values: list[float], p: float) -> float:
    """The ``p``-th percentile (0-100) by linear interpolation between closest ranks."""
    n = len(sorted_values)
    pos = (n - 1) * p / 100.0
    lo = int(pos)
    hi = min(lo + 1, n - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def agree(a: Any, b: Any) -> bool:
    """Whether two engines' results are the same answer (numbers to 1e-9 relative)."""
    if a is None or b is None:
        return False
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(agree(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))
    return a == b
