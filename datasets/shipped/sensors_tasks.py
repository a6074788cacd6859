"""Question templates over ``sensors.csv``: hourly readings from four sites, with dropouts.

Site and day means, extremes, missing readings, spreads and correlations;
appended later, hour-to-hour rises and rolling means over consecutive
readings. The table comes from ``csv_tables.make_sensors``.

Each template takes the table as read back from disk and a seeded generator
for its parameters, computes the gold answer with pandas, and returns a
``Draft`` (or ``None`` when the drawn parameters give an ambiguous answer,
e.g. a tie for first place). ``TEMPLATES`` is their order in the starter set
(``starter.SOURCES``): append only, so the ids of existing tasks stay put.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from analyst_env.datasets.shipped.draft import (
    Draft,
    integer,
    number,
    ranking,
    repeat,
    text,
    top_labels,
)
from analyst_env.datasets.shipped.draft import pick as _pick

Template = Callable[[pd.DataFrame, np.random.Generator], Draft | None]


def sen_site_day_mean(df, rng):
    s, day = _pick(rng, df.site), _pick(rng, df.timestamp.str[:10])
    v = df[(df.site == s) & (df.timestamp.str[:10] == day)].temperature_c.mean()
    return number(
        f"What was the mean temperature_c at the {s} site on {day}?", v, 2, "easy", site=s, date=day
    )


def sen_site_max_humidity(df, rng):
    s = _pick(rng, df.site)
    return number(
        f"What is the highest humidity_pct recorded at the {s} site?",
        df[df.site == s].humidity_pct.max(),
        1,
        "easy",
        site=s,
    )


def sen_missing_temps(df, rng):
    return integer(
        "How many readings have a missing temperature_c value?",
        df.temperature_c.isna().sum(),
        "easy",
    )


def sen_hottest_day(df, rng):
    top = top_labels(df.groupby(df.timestamp.str[:10]).temperature_c.mean(), 1)
    return top and text(
        "On which date was the average temperature_c over all sites and hours the highest?",
        top[0],
        "date in YYYY-MM-DD form",
        "medium",
    )


def sen_pressure_std(df, rng):
    s = _pick(rng, df.site)
    return number(
        f"What is the sample standard deviation of pressure_hpa at the {s} site?",
        df[df.site == s].pressure_hpa.std(),
        2,
        "medium",
        site=s,
    )


def sen_temp_humidity_corr(df, rng):
    s = _pick(rng, df.site)
    sub = df[df.site == s]
    return number(
        f"What is the Pearson correlation between temperature_c and humidity_pct at the {s} site "
        "(rows with a missing value excluded)?",
        sub.temperature_c.corr(sub.humidity_pct),
        3,
        "hard",
        site=s,
    )


def sen_site_rank(df, rng):
    top = top_labels(df.groupby("site").temperature_c.mean(), df.site.nunique())
    return top and ranking(
        "Order the sites by mean temperature_c.", top, "site names", "warmest first", "medium"
    )


# --- window functions, ranks within groups and pivots (appended: earlier ids stay stable) ---


@repeat(3)
def sen_max_hourly_rise(df, rng):
    s = _pick(rng, df.site)
    sub = df[df.site == s].sort_values("timestamp")
    v = sub.temperature_c.diff().max()  # diff is NaN next to a missing reading, and max skips NaN
    return number(
        f"At the {s} site, what is the largest rise in temperature_c from one hourly "
        "reading to the next (skip pairs where either reading is missing)?",
        v,
        2,
        "hard",
        site=s,
    )


@repeat(3)
def sen_rolling_max(df, rng):
    s, w = _pick(rng, df.site), int(rng.choice([6, 12, 24]))
    sub = df[df.site == s].sort_values("timestamp")
    v = sub.temperature_c.rolling(w).mean().max()
    return number(
        f"At the {s} site, what is the highest {w}-hour rolling mean of temperature_c "
        f"(windows of {w} "
        f"consecutive hourly readings; only windows with all {w} readings present count)?",
        v,
        2,
        "hard",
        site=s,
        window=w,
    )


TEMPLATES: list[Template] = [
    sen_site_day_mean,
    sen_site_max_humidity,
    sen_missing_temps,
    sen_hottest_day,
    sen_pressure_std,
    sen_temp_humidity_corr,
    sen_site_rank,
    sen_max_hourly_rise,
    sen_rolling_max,
]
