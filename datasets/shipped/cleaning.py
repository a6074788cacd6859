"""Reference parsers for the messy values the starter generator writes on purpose.

Some starter files store numbers as text (``"$1,234.50"``), dates in several
formats in one column, or real Excel date cells next to text dates. The
templates compute their gold answers from the files as read back from disk,
so they need one strict way to turn those values into numbers and
timestamps; anything they cannot parse is an error, never a silent NaN.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import pandas as pd

MISSING_TEXT = ("", "N/A")
"""Cell texts that mean "not recorded" (pandas also reads both as NaN)."""


def parse_money(values: pd.Series) -> pd.Series:
    """Amounts as floats from numbers or text like ``"$1,234.50"``; missing stays NaN.

    Example:
        >>> parse_money(pd.Series(["$1,234.50", "7", 3.25, None, "N/A"])).tolist()
        [1234.5, 7.0, 3.25, nan, nan]

    Raises:
        ValueError: If a non-missing value is not a number after removing ``$`` and ``,``.
    """

    def one(v: object) -> float:
        if v is None or (isinstance(v, float) and v != v):
            return float("nan")
        if isinstance(v, str):
            t = v.strip()
            if t in MISSING_TEXT:
                return float("nan")
            return float(t.replace("$", "").replace(",", ""))
        return float(v)  # type: ignore[arg-type]

    return values.map(one).astype(float)


def parse_dates(values: pd.Series, formats: Sequence[str]) -> pd.Series:
    """Timestamps from date cells or text in any of ``formats`` (tried in order).

    Example:
        >>> s = pd.Series(["2023-04-05", "04/06/2023", "07 Apr 2023", dt.datetime(2023, 4, 8)])
        >>> parse_dates(s, ["%Y-%m-%d", "%m/%d/%Y", "%d %b %Y"]).dt.day.tolist()
        [5, 6, 7, 8]

    Raises:
        ValueError: If a value matches none of the formats.
    """

    cells = values.map(
        lambda v: pd.Timestamp(v) if isinstance(v, (dt.datetime, dt.date)) else pd.NaT
    )
    out = pd.to_datetime(cells)
    texts = values[out.isna()].astype(str).str.strip()
    for fmt in formats:
        out = out.fillna(pd.to_datetime(texts, format=fmt, errors="coerce"))
    bad = values[out.isna()]
    if len(bad):
        raise ValueError(f"date {bad.iloc[0]!r} matches none of {list(formats)}")
    return out
