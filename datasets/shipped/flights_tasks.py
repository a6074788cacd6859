"""Question templates over ``flights.csv``: domestic flights of 2023 with delays and cancellations.

Delay averages and percentiles, cancellation rates, busiest routes and
monthly counts by carrier and airport; appended later, a carrier's rank at an
origin airport. The table comes from ``csv_tables.make_flights``.

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
    ORDINAL,
    Draft,
    integer,
    nth_label,
    number,
    parts,
    ranking,
    repeat,
    text,
    top_labels,
)
from analyst_env.datasets.shipped.draft import pick as _pick

Template = Callable[[pd.DataFrame, np.random.Generator], Draft | None]


def fl_carrier_dep_delay(df, rng):
    c = _pick(rng, df.carrier)
    v = df[(df.carrier == c) & (df.cancelled == 0)].dep_delay_min.mean()
    return number(
        f"What is the average departure delay in minutes of non-cancelled {c} flights?",
        v,
        2,
        "easy",
        carrier=c,
    )


def fl_cancel_rate(df, rng):
    o = _pick(rng, df.origin)
    v = 100 * df[df.origin == o].cancelled.mean()
    return number(
        f"What percentage of flights departing from {o} were cancelled (a percentage "
        "between 0 and 100)?",
        v,
        2,
        "medium",
        origin=o,
    )


def fl_most_late_carrier(df, rng):
    top = top_labels(df[df.arr_delay_min > 15].carrier.value_counts(), 1)
    return top and text(
        "Which carrier has the most flights that arrived more than 15 minutes late?",
        top[0],
        "carrier code",
        "medium",
    )


def fl_top_routes(df, rng):
    top = top_labels((df.origin + "-" + df.dest).value_counts(), 3)
    return top and ranking(
        "What are the 3 busiest routes by number of flights? Write each route as ORIGIN-DEST "
        "(for example ATL-BOS).",
        top,
        "routes",
        "busiest first",
        "hard",
    )


def fl_month_origin_count(df, rng):
    o, m = _pick(rng, df.origin), int(rng.integers(1, 13))
    name = pd.Timestamp(2023, m, 1).strftime("%B")
    v = ((df.origin == o) & (df.flight_date.str[5:7] == f"{m:02d}")).sum()
    return integer(
        f"How many flights were scheduled to depart from {o} in {name} 2023?",
        v,
        "easy",
        origin=o,
        month=m,
    )


def fl_p90_arr_delay(df, rng):
    c = _pick(rng, df.carrier)
    v = df[df.carrier == c].arr_delay_min.dropna().quantile(0.9)
    return number(
        f"What is the 90th percentile of arrival delay (minutes) for {c} flights, ignoring "
        "cancelled flights and using linear interpolation?",
        v,
        1,
        "hard",
        carrier=c,
    )


def fl_evening_distance(df, rng):
    h = int(rng.integers(17, 21))
    v = df[df.sched_dep_hour >= h].distance_mi.mean()
    return number(
        f"What is the average distance in miles of flights scheduled to depart at hour {h} "
        "or later?",
        v,
        2,
        "easy",
        hour=h,
    )


def fl_carrier_summary(df, rng):
    c = _pick(rng, df.carrier)
    sub = df[df.carrier == c]
    return parts(
        f"For carrier {c}, report the number of cancelled flights and the mean arrival "
        "delay in minutes of the flights that were not cancelled.",
        [
            ("cancelled_flights", sub.cancelled.sum(), 0),
            ("mean_arr_delay", sub.arr_delay_min.mean(), 2),
        ],
        "medium",
        carrier=c,
    )


# --- window functions, ranks within groups and pivots (appended: earlier ids stay stable) ---


@repeat(3)
def fl_carrier_rank_at_origin(df, rng):
    o, k = _pick(rng, df.origin), int(rng.integers(1, 4))
    label = nth_label(df[df.origin == o].carrier.value_counts(), k)
    return label and text(
        f"Among flights departing from {o}, which carrier ranks {ORDINAL[k]} by number of flights?",
        label,
        "carrier code",
        "medium",
        origin=o,
        rank=k,
    )


TEMPLATES: list[Template] = [
    fl_carrier_dep_delay,
    fl_cancel_rate,
    fl_most_late_carrier,
    fl_top_routes,
    fl_month_origin_count,
    fl_p90_arr_delay,
    fl_evening_distance,
    fl_carrier_summary,
    fl_carrier_rank_at_origin,
]
