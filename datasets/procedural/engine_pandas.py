"""The pandas reading of a query (see ``query``): the way an analyst would compute the answer."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from analyst_env.datasets.procedural.domain_schema import Domain
from analyst_env.datasets.procedural.query import Query, pivot_rows, table_rows, uses_attr
from analyst_env.datasets.procedural.tables import ALT_UNITS, Mess, unit_col


def _numbers(s: pd.Series) -> pd.Series:
    if not pd.api.types.is_numeric_dtype(s):
        s = s.astype("string").str.replace(r"[$,]", "", regex=True)
    return pd.to_numeric(s, errors="coerce").astype(float)


def raw_facts(fact: pd.DataFrame, dim: pd.DataFrame | None, domain: Domain) -> dict[str, int]:
    """Counts about the file as written: duplicate rows, blank measure cells, unknown keys."""
    out = {
        "rows": len(fact),
        "duplicates": int(fact.duplicated().sum()),
        "missing_m1": int(fact[domain.m1.name].isna().sum()),
    }
    if dim is not None:
        known = set(dim[domain.key].astype(str))
        out["orphan_keys"] = int(
            (~fact[domain.key].drop_duplicates().astype(str).isin(known)).sum()
        )
    return out


def lookup_column(fact: pd.DataFrame, dim: pd.DataFrame, domain: Domain) -> list[str | None]:
    """Each record row's ``attr`` from the lookup table by its key (None for an unknown key),
    in file order: the column an in-place edit adds to the records sheet."""
    lookup = dict(zip(dim[domain.key].astype(str), dim[domain.attr[0]].astype(str)))
    mapped = fact[domain.key].astype(str).map(lookup)
    return [None if pd.isna(v) else str(v) for v in mapped]


def prepare(
    fact: pd.DataFrame, dim: pd.DataFrame | None, domain: Domain, mess: Mess
) -> pd.DataFrame:
    """Records by role: duplicates dropped, text numbers parsed, dates read, units converted."""
    d = domain
    if mess.duplicates:
        fact = fact.drop_duplicates()
    m1 = _numbers(fact[d.m1.name])
    if mess.units and d.m1.unit in ALT_UNITS:
        _, other, factor = ALT_UNITS[d.m1.unit]
        m1 = m1.where(fact[unit_col(d)] != other, m1 / factor)
    raw_dates = fact[d.date_col].astype(str)
    if mess.timezones:  # local timestamps with offsets: the day is the UTC day
        instants = pd.to_datetime(raw_dates, format="ISO8601", utc=True, errors="coerce")
        dates = instants.dt.tz_localize(None).dt.normalize()
    else:
        dates = pd.to_datetime(raw_dates, format="%Y-%m-%d", errors="coerce")
        if dates.isna().any():  # the second form is tried only where the first did not fit
            dates = dates.fillna(pd.to_datetime(raw_dates, format="%d/%m/%Y", errors="coerce"))
    out = pd.DataFrame(
        {
            "id": fact[d.id_col].astype(str),
            "date": dates,
            "g1": fact[d.g1[0]].astype(str),
            "g2": fact[d.g2[0]].astype(str),
            "key": fact[d.key].astype(str),
            "m1": m1,
            "m2": _numbers(fact[d.m2.name]),
        }
    )
    if dim is not None:
        lookup = dict(zip(dim[d.key].astype(str), dim[d.attr[0]].astype(str)))  # last key wins
        out["attr"] = out["key"].map(pd.Series(lookup))  # by index: ~2x a dict's map
    return out.reset_index(drop=True)


def _filter(df: pd.DataFrame, filters: list, known_attr: bool = False) -> pd.DataFrame:
    """The rows of ``df`` that pass every filter (and have a lookup attribute, if
    ``known_attr``), in their order: one mask, so the frame is cut once."""
    mask = df["attr"].notna() if known_attr else None
    for role, op, value in filters:
        if op == "eq":
            keep = df[role] == value
        elif op == "gt":
            keep = df[role] > value
        elif op == "lt":
            keep = df[role] < value
        elif op == "year":
            keep = df["date"].dt.year == value
        elif op == "month":
            keep = df["date"].dt.strftime("%Y-%m") == value
        else:
            raise ValueError(f"unknown filter {op!r}")
        mask = keep if mask is None else mask & keep
    return df if mask is None else df[mask]


def _agg(s: pd.Series, fn: str, frame: pd.DataFrame) -> float:
    if fn == "count":
        return float(len(frame))
    if fn == "nunique":
        return float(frame["key"].nunique())
    return _statistic(s, fn)


def _statistic(s: pd.Series, fn: str) -> float:
    """``fn`` of the values of ``s`` that are not missing (NaN when undefined)."""
    s = s.dropna()
    if s.empty or (fn == "std" and len(s) < 2):
        return float("nan")
    return float(
        {
            "sum": s.sum,
            "mean": s.mean,
            "min": s.min,
            "max": s.max,
            "median": s.median,
            "std": lambda: s.std(ddof=1),
        }[fn]()
    )


def _labels(df: pd.DataFrame, by: str) -> pd.Series:
    if by == "month":
        return df["date"].dt.strftime("%Y-%m")
    if by == "quarter":
        return df["date"].dt.year.astype(str) + "-Q" + df["date"].dt.quarter.astype(str)
    if by == "pivot":
        return df["g1"] + "|" + df["g2"]
    return df[by]


def grouped(df: pd.DataFrame, by: str, fn: str, role: str) -> dict[str, float]:
    """``fn`` of ``role`` per label of ``by``, labels in sorted order.

    Only the column the aggregate reads is grouped (the key for ``nunique``, the role
    otherwise): each group's values are the rows' values in file order either way, and a
    group of one column costs far less to cut out than a group of the whole frame.
    """
    labels = _labels(df, by)
    column = "key" if fn == "nunique" else role if role in df else "m1"
    out = {}
    for k, values in df[column].groupby(labels, sort=True):
        if fn == "count":
            out[str(k)] = float(len(values))
        elif fn == "nunique":
            out[str(k)] = float(values.nunique())
        else:
            out[str(k)] = _statistic(values, fn)
    return out


def _reduce(values: dict[str, float], reducer: tuple) -> Any:
    s = pd.Series(values).dropna()
    if s.empty:
        return None
    name, *args = reducer
    if name in ("argmax", "argmin", "top", "bottom", "kth"):
        asc = name in ("argmin", "bottom")
        k = 1 if name in ("argmax", "argmin") else args[0]
        order = s.round(9).sort_values(ascending=asc, kind="stable")
        if len(order) < k + (name == "kth") or len(set(order.iloc[:k])) < k:
            return None
        if len(order) > k and order.iloc[k - 1] == order.iloc[k]:
            return None
        top = [str(x) for x in order.index[:k]]
        return top[-1] if name in ("argmax", "argmin", "kth") else top
    if name == "value":
        return float(s[args[0]]) if args[0] in s.index else None
    if name == "share":
        total = s.sum()
        return float(100.0 * s.get(args[0], 0.0) / total) if total else None
    if name == "count_above":
        return int((s > args[0]).sum())
    if name == "spread":
        return float(s.max() - s.min())
    raise ValueError(f"unknown reducer {name!r}")


def evaluate(q: Query, records: pd.DataFrame) -> Any:
    """The answer to ``q`` over the prepared records (None when undefined)."""
    df = _filter(records, q["filters"], known_attr=uses_attr(q) and "attr" in records)
    name, *a = q["op"]
    if df.empty:
        return None
    if name == "missing":
        return int(df[a[0]].isna().sum())
    if name == "count":
        return int(len(df))
    if name == "agg":
        value = _agg(df[a[1]], a[0], df)
        return None if np.isnan(value) else value
    if name == "group":
        by, fn, role, reducer = a
        return _reduce(grouped(df, by, fn, role), reducer)
    if name == "table":
        by, columns = a
        return table_rows([grouped(df, by, fn, role) for fn, role in columns])
    if name == "pivot_table":
        return pivot_rows(grouped(df, "pivot", a[0], a[1]))
    if name == "hist":  # counts per bin: [low, high), the last bin [low, high]
        return [int(n) for n in np.histogram(df[a[0]].dropna(), bins=list(a[1]))[0]]
    if name == "percentile":
        s = df[a[0]].dropna()
        return float(np.percentile(s, a[1])) if len(s) else None
    if name == "iqr":
        s = df[a[0]].dropna()
        return float(np.percentile(s, 75) - np.percentile(s, 25)) if len(s) > 1 else None
    if name == "corr":
        pair = df[[a[0], a[1]]].dropna()
        return float(pair[a[0]].corr(pair[a[1]])) if len(pair) > 2 else None
    if name == "welch":
        role, by, x, y = a
        sx, sy = df.loc[df[by] == x, role].dropna(), df.loc[df[by] == y, role].dropna()
        if len(sx) < 2 or len(sy) < 2:
            return None
        return float(
            (sx.mean() - sy.mean()) / np.sqrt(sx.var(ddof=1) / len(sx) + sy.var(ddof=1) / len(sy))
        )
    if name == "zcount":
        s = df[a[0]].dropna()
        return int((((s - s.mean()) / s.std(ddof=1)).abs() > a[1]).sum()) if len(s) > 2 else None
    if name == "iqr_outliers":
        s = df[a[0]].dropna()
        if s.empty:
            return None
        q1, q3 = np.percentile(s, 25), np.percentile(s, 75)
        return int(((s < q1 - 1.5 * (q3 - q1)) | (s > q3 + 1.5 * (q3 - q1))).sum())
    if name == "growth":
        monthly = grouped(df, "month", "sum", "m1")
        x, y = monthly.get(a[0]), monthly.get(a[1])
        return float(100.0 * (y - x) / x) if x and y is not None else None
    if name == "rolling_max":
        monthly = pd.Series(grouped(df, "month", "sum", "m1")).sort_index()
        full = monthly.reindex(
            pd.period_range(monthly.index[0], monthly.index[-1], freq="M").astype(str),
            fill_value=0.0,
        )
        rolled = full.rolling(a[0]).mean().dropna()
        return float(rolled.max()) if len(rolled) else None
    if name == "daily_jump":
        daily = df.groupby(df["date"].dt.strftime("%Y-%m-%d"))["m1"].sum().sort_index()
        return float(daily.diff().max()) if len(daily) > 1 else None
    if name == "top_per_group":
        s = df.dropna(subset=[a[1]])
        best = s.groupby(a[0])[a[1]].transform("max")
        winners = s[s[a[1]] == best]
        if winners.groupby(a[0]).size().max() > 1:
            return None
        return sorted(winners["id"].tolist())
    if name == "group_topn_mean":
        by, role, n = a
        s = df.dropna(subset=[role])
        top = s.sort_values(role, ascending=False, kind="stable").groupby(by).head(n)
        means = top.groupby(by)[role].mean().where(s.groupby(by)[role].size() >= n)
        return _reduce(means.to_dict(), ("argmax",))
    if name == "running_share":
        by, label, pct = a
        s = df[df[by] == label].dropna(subset=["m1"]).sort_values(["date", "id"], kind="stable")
        if s.empty:
            return None
        cum = s["m1"].cumsum()
        hit = s.loc[cum >= cum.iloc[-1] * pct / 100.0, "date"]
        return hit.iloc[0].strftime("%Y-%m-%d")
    if name == "cohort":
        first = df.groupby("key")["date"].min().dt.strftime("%Y-%m")
        last = df.groupby("key")["date"].max().dt.strftime("%Y-%m")
        members = first[first == a[0]].index
        if len(members) == 0:
            return None
        return int(len(members)) if a[1] == "size" else int((last[members] > a[0]).sum())
    if name == "funnel_both":
        keys_a = set(df.loc[df["g2"] == a[0], "key"])
        keys_b = set(df.loc[df["g2"] == a[1], "key"])
        return int(len(keys_a & keys_b))
    if name == "set_only":
        by, x, y = a
        only = set(df.loc[df["g2"] == x, by]) - set(df.loc[df["g2"] == y, by])
        return sorted(only) or None
    raise ValueError(f"unknown op {name!r}")
