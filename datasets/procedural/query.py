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
  undefined, and the task is dropped.
"""

from __future__ import annotations

from typing import Any

Query = dict[str, Any]

AGG_FNS = ("count", "sum", "mean", "min", "max", "median", "std", "nunique")
GROUP_BYS = ("g1", "g2", "attr", "month", "quarter", "pivot")
REDUCERS = ("argmax", "argmin", "top", "bottom", "kth", "value", "share", "count_above", "spread")


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
