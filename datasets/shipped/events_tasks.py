"""Question templates over ``events.csv``: UTC timestamps asked about in local time zones, and
per-user sequences.

Timestamps are stored in UTC (``2024-03-09T23:15:00Z``) over a span that
crosses the daylight-saving changes of the US, Europe and Australia, so a
"local day" must be computed with a real time-zone conversion (pandas
``tz_convert``), not a fixed offset. Other templates need window logic over
each user's events (gaps to the previous event, first purchase).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from analyst_env.datasets.shipped.draft import (
    Draft,
    integer,
    number,
    pick,
    repeat,
    reuse_last,
    text,
    top_labels,
)
from analyst_env.datasets.shipped.messy_tables import ZONES

Template = Callable[[pd.DataFrame, np.random.Generator], Draft | None]

UTC = "ts_utc is in UTC."


@reuse_last
def _timed(df: pd.DataFrame) -> pd.DataFrame:
    """The events with ``t``, the parsed UTC timestamp."""
    return df.assign(t=pd.to_datetime(df.ts_utc, format="%Y-%m-%dT%H:%M:%SZ", utc=True))


def _local(df: pd.DataFrame, zone: str) -> pd.Series:
    return df.t.dt.tz_convert(zone)


def _day(rng: np.random.Generator) -> str:
    return (pd.Timestamp("2024-03-02") + pd.Timedelta(days=int(rng.integers(0, 42)))).strftime(
        "%Y-%m-%d"
    )


@repeat(4)
def ev_local_day_purchases(df, rng):
    z, d = str(rng.choice(ZONES)), _day(rng)
    e = _timed(df)
    v = ((e.event_type == "purchase") & (_local(e, z).dt.strftime("%Y-%m-%d") == d)).sum()
    return integer(
        f"How many purchase events happened on {d} local time in the {z} time zone? {UTC}",
        v,
        "medium",
        zone=z,
        date=d,
    )


@repeat(4)
def ev_local_day_revenue(df, rng):
    z, d = str(rng.choice(ZONES)), _day(rng)
    e = _timed(df)
    v = e[
        (e.event_type == "purchase") & (_local(e, z).dt.strftime("%Y-%m-%d") == d)
    ].amount_usd.sum()
    return number(
        f"What was the total amount_usd of purchases made on {d} in {z} local time? {UTC}",
        v,
        2,
        "hard",
        zone=z,
        date=d,
    )


@repeat(3)
def ev_busiest_local_hour(df, rng):
    z = str(rng.choice(ZONES))
    e = _timed(df)
    top = top_labels(e.groupby(_local(e, z).dt.hour).size(), 1)
    return top and integer(
        f"In {z} local time, during which hour of the day (0 to 23) do the most events happen, "
        f"over the whole file? {UTC}",
        int(top[0]),
        "hard",
        zone=z,
    )


@repeat(3)
def ev_top_local_date(df, rng):
    z = str(rng.choice(ZONES))
    e = _timed(df)
    sub = e[e.event_type == "purchase"]
    top = top_labels(sub.groupby(_local(sub, z).dt.strftime("%Y-%m-%d")).size(), 1)
    return top and text(
        f"Which local calendar date in the {z} time zone had the most purchase events? {UTC}",
        top[0],
        "date in YYYY-MM-DD form",
        "medium",
        zone=z,
    )


@repeat(3)
def ev_date_shift(df, rng):
    z = str(rng.choice(ZONES))
    e = _timed(df)
    v = (e.t.dt.strftime("%Y-%m-%d") != _local(e, z).dt.strftime("%Y-%m-%d")).sum()
    return integer(
        f"How many events fall on a different calendar date in {z} local time than in UTC? {UTC}",
        v,
        "hard",
        zone=z,
    )


@repeat(3)
def ev_weekend_share(df, rng):
    z = str(rng.choice(ZONES))
    e = _timed(df)
    sub = e[e.event_type == "purchase"]
    v = 100 * (_local(sub, z).dt.day_of_week >= 5).mean()
    return number(
        f"What percentage of purchase events happened on a Saturday or Sunday in {z} local time "
        f"(a percentage between 0 and 100)? {UTC}",
        v,
        2,
        "medium",
        zone=z,
    )


@repeat(3)
def ev_utc_day_users(df, rng):
    d = _day(rng)
    v = df[df.ts_utc.str.startswith(d)].user_id.nunique()
    return integer(
        f"How many distinct users had at least one event on {d} (UTC)? {UTC}", v, "easy", date=d
    )


@repeat(3)
def ev_median_gap(df, rng):
    dev = pick(rng, df.device)
    e = _timed(df)
    sub = e[e.device == dev].sort_values(["user_id", "t"], kind="stable")
    gaps = sub.groupby("user_id").t.diff().dropna().dt.total_seconds() / 60
    return number(
        f"Considering only {dev} events: for each user, take the minutes between each of "
        "their events and their previous event. What is the median of these gaps over all users?",
        gaps.median(),
        1,
        "hard",
        device=dev,
    )


@repeat(3)
def ev_quick_first_purchase(df, rng):
    h = int(rng.choice([24, 48, 72, 168]))
    e = _timed(df)
    first_event = e.groupby("user_id").t.min()
    first_buy = e[e.event_type == "purchase"].groupby("user_id").t.min()
    delay = (first_buy - first_event.reindex(first_buy.index)).dt.total_seconds() / 3600
    return integer(
        f"How many users made their first purchase within {h} hours (inclusive) of their "
        "first event of any type?",
        int((delay <= h).sum()),
        "hard",
        hours=h,
    )


@repeat(3)
def ev_device_share(df, rng):
    dev = pick(rng, df.device)
    sub = df[df.event_type == "purchase"]
    v = 100 * sub[sub.device == dev].amount_usd.sum() / sub.amount_usd.sum()
    return number(
        f"What share of total purchase amount_usd came from {dev} events, as a percentage "
        "between 0 and 100?",
        v,
        2,
        "easy",
        device=dev,
    )


TEMPLATES: list[Template] = [
    ev_local_day_purchases,
    ev_local_day_revenue,
    ev_busiest_local_hour,
    ev_top_local_date,
    ev_date_shift,
    ev_weekend_share,
    ev_utc_day_users,
    ev_median_gap,
    ev_quick_first_purchase,
    ev_device_share,
]
