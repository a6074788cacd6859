"""The standard-library reading of a query (see ``query``): no pandas, no numpy.

It is deliberately written from the rules in ``query`` rather than from
``engine_pandas``, so that a pandas default the question does not state (how
missing values are read, how ties sort) shows up as a disagreement.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Callable
from typing import Any

from analyst_env.datasets.procedural import plain_cells as cells
from analyst_env.datasets.procedural.domain_schema import Domain
from analyst_env.datasets.procedural.query import (
    Query,
    percentile_linear,
    pivot_rows,
    table_rows,
    uses_attr,
)
from analyst_env.datasets.procedural.tables import ALT_UNITS, Mess, unit_col

Record = dict[str, Any]


def raw_facts(fact: list[Record], dim: list[Record] | None, domain: Domain) -> dict[str, int]:
    seen: set[tuple] = set()
    dups = 0
    for row in fact:
        sig = cells.signature(row)
        dups += sig in seen
        seen.add(sig)
    out = {
        "rows": len(fact),
        "duplicates": dups,
        "missing_m1": sum(cells.blank(r[domain.m1.name]) for r in fact),
    }
    if dim is not None:
        known = {cells.text(r[domain.key]) for r in dim}
        out["orphan_keys"] = len({cells.text(r[domain.key]) for r in fact} - known)
    return out


def lookup_column(fact: list[Record], dim: list[Record], domain: Domain) -> list[Any]:
    """Each record row's ``attr`` cell, as stored in the lookup table (None for an unknown key)."""
    lookup = {cells.text(r[domain.key]): r[domain.attr[0]] for r in dim}
    return [lookup.get(cells.text(r[domain.key])) for r in fact]


def prepare(
    fact: list[Record], dim: list[Record] | None, domain: Domain, mess: Mess
) -> list[Record]:
    d = domain
    if mess.duplicates:
        seen: set[tuple] = set()
        unique = []
        for row in fact:
            sig = cells.signature(row)
            if sig not in seen:
                seen.add(sig)
                unique.append(row)
        fact = unique
    lookup = (
        {cells.text(r[d.key]): cells.text(r[d.attr[0]]) for r in dim} if dim is not None else None
    )
    other, factor = ALT_UNITS[d.m1.unit][1:] if mess.units and d.m1.unit in ALT_UNITS else (None, 1)
    unit = unit_col(d) if other is not None else ""
    id_col, date_col, g1, g2, key, m1_col, m2_col = (
        d.id_col,
        d.date_col,
        d.g1[0],
        d.g2[0],
        d.key,
        d.m1.name,
        d.m2.name,
    )
    # Column by column: one pass per role in comprehensions, then one dict per record.
    m1s = [cells.number(row[m1_col]) for row in fact]
    if other is not None:
        m1s = [
            m / factor if m is not None and row[unit] == other else m for m, row in zip(m1s, fact)
        ]
    date_cells = [row[date_col] for row in fact]
    typed = list(zip(map(type, date_cells), date_cells))  # 1, 1.0 and "1" are read apart
    read = {k: cells.day(k[1]) for k in set(typed)}  # a day recurs on many rows: read it once
    records: list[Record] = [
        {
            "id": str(row[id_col]),
            "date": read[t],
            "g1": str(row[g1]),
            "g2": str(row[g2]),
            "key": str(row[key]),
            "m1": m1,
            "m2": cells.number(row[m2_col]),
        }
        for row, t, m1 in zip(fact, typed, m1s)
    ]
    if lookup is not None:
        for rec in records:
            rec["attr"] = lookup.get(rec["key"])
    return records


def _keep(rec: Record, role: str, op: str, value: Any) -> bool:
    if op == "year":
        return rec["date"].year == value
    if op == "month":
        return rec["date"].strftime("%Y-%m") == value
    x = rec[role]
    if x is None:
        return False
    if op == "eq":
        return x == value
    if op == "gt":
        return x > value
    if op == "lt":
        return x < value
    raise ValueError(f"unknown filter {op!r}")


def _agg(rows: list[Record], fn: str, role: str) -> float | None:
    if fn == "count":
        return float(len(rows))
    if fn == "nunique":
        return float(len({r["key"] for r in rows}))
    xs = [r[role] for r in rows if r[role] is not None]
    if not xs or (fn == "std" and len(xs) < 2):
        return None
    aggregates: dict[str, Callable[[list[Any]], float]] = {
        "sum": math.fsum,
        "mean": statistics.fmean,
        "min": min,
        "max": max,
        "median": statistics.median,
        "std": statistics.stdev,
    }
    return aggregates[fn](xs)


def _label(rec: Record, by: str) -> str:
    if by == "month":
        return rec["date"].strftime("%Y-%m")
    if by == "quarter":
        return f"{rec['date'].year}-Q{(rec['date'].month - 1) // 3 + 1}"
    if by == "pivot":
        return f"{rec['g1']}|{rec['g2']}"
    return rec[by]


def grouped(rows: list[Record], by: str, fn: str, role: str) -> dict[str, float | None]:
    groups: dict[str, list[Record]] = {}
    for r in rows:
        groups.setdefault(_label(r, by), []).append(r)
    return {k: _agg(v, fn, role) for k, v in sorted(groups.items())}


def _reduce(values: dict[str, float | None], reducer: tuple) -> Any:
    items = [(k, v) for k, v in values.items() if v is not None]
    if not items:
        return None
    name, *args = reducer
    if name in ("argmax", "argmin", "top", "bottom", "kth"):
        k = 1 if name in ("argmax", "argmin") else args[0]
        sign = 1 if name in ("argmin", "bottom") else -1
        order = sorted(((round(v, 9), lab) for lab, v in items), key=lambda t: sign * t[0])
        if len(order) < k + (name == "kth"):
            return None
        ranked = [v for v, _ in order]
        if len(set(ranked[:k])) < k or (len(ranked) > k and ranked[k - 1] == ranked[k]):
            return None
        top = [lab for _, lab in order[:k]]
        return top[-1] if name in ("argmax", "argmin", "kth") else top
    if name == "value":
        return values.get(args[0])
    if name == "share":
        total = math.fsum(v for _, v in items)
        return 100.0 * (values.get(args[0]) or 0.0) / total if total else None
    if name == "count_above":
        return sum(v > args[0] for _, v in items)
    if name == "spread":
        return max(v for _, v in items) - min(v for _, v in items)
    raise ValueError(f"unknown reducer {name!r}")


def _column(rows: list[Record], role: str) -> list[float]:
    return [r[role] for r in rows if r[role] is not None]


def _hist(xs: list[float], edges: list[float]) -> list[int]:
    """Counts per bin: a value on an inner edge counts in the upper bin, the top edge in the
    last."""
    counts = [0] * (len(edges) - 1)
    for x in xs:
        if edges[0] <= x <= edges[-1]:
            counts[min(bisect.bisect_right(edges, x) - 1, len(counts) - 1)] += 1
    return counts


def evaluate(q: Query, records: list[Record]) -> Any:
    rows = [r for r in records if r.get("attr") is not None] if uses_attr(q) else records
    for f in q["filters"]:
        rows = [r for r in rows if _keep(r, *f)]
    name, *a = q["op"]
    if not rows:
        return None
    if name == "missing":
        return sum(r[a[0]] is None for r in rows)
    if name == "count":
        return len(rows)
    if name == "agg":
        return _agg(rows, a[0], a[1])
    if name == "group":
        by, fn, role, reducer = a
        return _reduce(grouped(rows, by, fn, role), reducer)
    if name == "table":
        by, columns = a
        return table_rows([grouped(rows, by, fn, role) for fn, role in columns])
    if name == "pivot_table":
        return pivot_rows(grouped(rows, "pivot", a[0], a[1]))
    if name == "hist":
        return _hist(_column(rows, a[0]), list(a[1]))
    if name in ("percentile", "iqr", "zcount", "iqr_outliers"):
        xs = sorted(_column(rows, a[0]))
        if not xs:
            return None
        if name == "percentile":
            return percentile_linear(xs, a[1])
        if name == "iqr":
            return percentile_linear(xs, 75) - percentile_linear(xs, 25) if len(xs) > 1 else None
        if name == "zcount":
            if len(xs) < 3:
                return None
            mean, sd = statistics.fmean(xs), statistics.stdev(xs)
            return sum(abs((x - mean) / sd) > a[1] for x in xs)
        q1, q3 = percentile_linear(xs, 25), percentile_linear(xs, 75)
        return sum(x < q1 - 1.5 * (q3 - q1) or x > q3 + 1.5 * (q3 - q1) for x in xs)
    if name == "corr":
        pairs = [(r[a[0]], r[a[1]]) for r in rows if r[a[0]] is not None and r[a[1]] is not None]
        if len(pairs) < 3:
            return None
        return statistics.correlation([p[0] for p in pairs], [p[1] for p in pairs])
    if name == "welch":
        role, by, x, y = a
        sx = _column([r for r in rows if r[by] == x], role)
        sy = _column([r for r in rows if r[by] == y], role)
        if len(sx) < 2 or len(sy) < 2:
            return None
        se = math.sqrt(statistics.variance(sx) / len(sx) + statistics.variance(sy) / len(sy))
        return (statistics.fmean(sx) - statistics.fmean(sy)) / se
    if name == "growth":
        monthly = grouped(rows, "month", "sum", "m1")
        x, y = monthly.get(a[0]), monthly.get(a[1])
        return 100.0 * (y - x) / x if x and y is not None else None
    if name == "rolling_max":
        monthly = grouped(rows, "month", "sum", "m1")
        first, last = min(monthly), max(monthly)
        y, m = int(first[:4]), int(first[5:])
        series = []
        while f"{y:04d}-{m:02d}" <= last:
            series.append(monthly.get(f"{y:04d}-{m:02d}") or 0.0)
            y, m = (y + 1, 1) if m == 12 else (y, m + 1)
        windows = [
            statistics.fmean(series[i - a[0] + 1 : i + 1]) for i in range(a[0] - 1, len(series))
        ]
        return max(windows) if windows else None
    if name == "daily_jump":
        daily: dict[str, float] = {}
        for r in rows:
            day = r["date"].isoformat()
            daily[day] = daily.get(day, 0.0) + (r["m1"] or 0.0)
        values = [daily[k] for k in sorted(daily)]
        return max(b - x for x, b in zip(values, values[1:])) if len(values) > 1 else None
    if name == "top_per_group":
        by, role = a
        best: dict[str, list[Record]] = {}
        for r in rows:
            if r[role] is None:
                continue
            cur = best.get(r[by])
            if cur is None or r[role] > cur[0][role]:
                best[r[by]] = [r]
            elif r[role] == cur[0][role]:
                cur.append(r)
        if any(len(v) > 1 for v in best.values()):
            return None
        return sorted(v[0]["id"] for v in best.values())
    if name == "group_topn_mean":
        by, role, n = a
        groups: dict[str, list[float]] = {}
        for r in rows:
            if r[role] is not None:
                groups.setdefault(r[by], []).append(r[role])
        means = {
            k: (statistics.fmean(sorted(v, reverse=True)[:n]) if len(v) >= n else None)
            for k, v in groups.items()
        }
        return _reduce(means, ("argmax",))
    if name == "running_share":
        by, label, pct = a
        s = sorted(
            (r for r in rows if r[by] == label and r["m1"] is not None),
            key=lambda r: (r["date"], r["id"]),
        )
        if not s:
            return None
        total, cum = math.fsum(r["m1"] for r in s), 0.0
        for r in s:
            cum += r["m1"]
            if cum >= total * pct / 100.0:
                return r["date"].isoformat()
        return None
    if name == "cohort":
        first_seen: dict[str, str] = {}
        last_seen: dict[str, str] = {}
        for r in rows:
            month = r["date"].strftime("%Y-%m")
            first_seen[r["key"]] = min(first_seen.get(r["key"], month), month)
            last_seen[r["key"]] = max(last_seen.get(r["key"], month), month)
        members = [k for k, m in first_seen.items() if m == a[0]]
        if not members:
            return None
        return len(members) if a[1] == "size" else sum(last_seen[k] > a[0] for k in members)
    if name == "funnel_both":
        keys_a = {r["key"] for r in rows if r["g2"] == a[0]}
        keys_b = {r["key"] for r in rows if r["g2"] == a[1]}
        return len(keys_a & keys_b)
    if name == "set_only":
        by, x, y = a
        only = {r[by] for r in rows if r["g2"] == x} - {r[by] for r in rows if r["g2"] == y}
        return sorted(only) or None
    raise ValueError(f"unknown op {name!r}")
