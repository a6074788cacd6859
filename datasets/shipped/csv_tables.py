"""The starter set's tidy CSV tables: sales orders, an HR roster, flights and sensor readings.

Each ``make_*`` function returns one plain pandas frame whose shape and quirks
resemble real analyst inputs: skewed category mixes, missing values, dates as
ISO strings, prices with cents. All randomness comes from the
``numpy.random.Generator`` passed in; the category pools and draws they share
are in ``tables``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analyst_env.datasets.shipped.tables import (
    CATEGORIES,
    CITIES,
    REGIONS,
    mix_weights,
    person_names,
    random_dates,
)


def make_sales(rng: np.random.Generator, n: int = 2000) -> pd.DataFrame:
    """Retail order lines over 2022-2023."""
    cats = list(CATEGORIES)
    category = rng.choice(cats, n, p=mix_weights(rng, len(cats)))
    lo = np.array([CATEGORIES[c][0] for c in category])
    hi = np.array([CATEGORIES[c][1] for c in category])
    price = np.round(rng.uniform(lo, hi), 2)
    units = rng.integers(1, 12, n)
    discount = rng.choice([0.0, 0.05, 0.1, 0.2], n, p=[0.55, 0.2, 0.15, 0.1])
    df = pd.DataFrame(
        {
            "order_date": random_dates(rng, "2022-01-01", 730, n),
            "region": rng.choice(REGIONS, n, p=mix_weights(rng, len(REGIONS))),
            "channel": rng.choice(["Online", "Store", "Phone"], n, p=[0.5, 0.4, 0.1]),
            "customer_id": rng.integers(1000, 1400, n),
            "category": category,
            "units": units,
            "unit_price": price,
            "discount": discount,
        }
    )
    df["revenue"] = np.round(df["units"] * df["unit_price"] * (1 - df["discount"]), 2)
    df = df.sort_values(["order_date", "customer_id"], kind="stable").reset_index(drop=True)
    df.insert(0, "order_id", np.arange(100001, 100001 + n))
    return df


def make_employees(rng: np.random.Generator, n: int = 400) -> pd.DataFrame:
    """An HR roster with salaries, levels and some missing review scores."""
    depts = {
        "Engineering": 98000,
        "Sales": 72000,
        "Marketing": 76000,
        "Finance": 85000,
        "HR": 64000,
        "Support": 55000,
        "Operations": 68000,
    }
    levels = {"Junior": 0.75, "Mid": 1.0, "Senior": 1.3, "Lead": 1.6}
    dept = rng.choice(list(depts), n, p=mix_weights(rng, len(depts)))
    level = rng.choice(list(levels), n, p=[0.3, 0.35, 0.25, 0.1])
    base = np.array([depts[d] * levels[lv] for d, lv in zip(dept, level)])
    salary = np.round(base * rng.lognormal(0, 0.12, n), -2)
    score = np.round(rng.normal(3.4, 0.7, n).clip(1, 5), 1)
    score[rng.random(n) < 0.08] = np.nan
    df = pd.DataFrame(
        {
            "emp_id": np.arange(1, n + 1),
            "name": person_names(rng, n),
            "department": dept,
            "job_level": level,
            "city": rng.choice(CITIES, n, p=mix_weights(rng, len(CITIES))),
            "hire_date": random_dates(rng, "2010-01-01", 14 * 365, n),
            "age": (22 + rng.gamma(4, 4, n)).astype(int).clip(21, 66),
            "salary": salary,
            "performance_score": score,
            "remote": rng.choice(["Yes", "No"], n, p=[0.35, 0.65]),
        }
    )
    df["salary"] = df["salary"] + (df["age"] - 30) * 250
    return df


AIRPORTS = {"ATL": 0, "BOS": 1, "DEN": 2, "JFK": 3, "LAX": 4, "ORD": 5, "SEA": 6, "SFO": 7}
_COORDS = np.array(
    [
        [33.6, -84.4],
        [42.4, -71.0],
        [39.9, -104.7],
        [40.6, -73.8],
        [33.9, -118.4],
        [41.9, -87.9],
        [47.4, -122.3],
        [37.6, -122.4],
    ]
)


def make_flights(rng: np.random.Generator, n: int = 3000) -> pd.DataFrame:
    """Domestic flights in 2023 with delays and cancellations."""
    codes = list(AIRPORTS)
    origin = rng.choice(codes, n, p=mix_weights(rng, len(codes)))
    shift = rng.integers(1, len(codes), n)
    dest = np.array([codes[(AIRPORTS[o] + s) % len(codes)] for o, s in zip(origin, shift)])
    a, b = _COORDS[[AIRPORTS[o] for o in origin]], _COORDS[[AIRPORTS[d] for d in dest]]
    distance = (np.hypot(a[:, 0] - b[:, 0], (a[:, 1] - b[:, 1]) * 0.8) * 69).round().astype(int)
    carriers = ["AA", "DL", "UA", "WN", "B6", "AS"]
    carrier = rng.choice(carriers, n, p=mix_weights(rng, len(carriers)))
    carrier_bias = {c: rng.uniform(-2, 10) for c in carriers}
    hour = rng.integers(5, 23, n)
    dep = (
        rng.gamma(1.2, 14, n) - 8 + np.array([carrier_bias[c] for c in carrier]) + (hour - 12) * 0.8
    )
    arr = dep + rng.normal(-3, 9, n)
    cancelled = (rng.random(n) < 0.03).astype(int)
    df = pd.DataFrame(
        {
            "flight_date": random_dates(rng, "2023-01-01", 365, n),
            "carrier": carrier,
            "origin": origin,
            "dest": dest,
            "sched_dep_hour": hour,
            "distance_mi": distance,
            "dep_delay_min": np.where(cancelled == 1, np.nan, dep.round()),
            "arr_delay_min": np.where(cancelled == 1, np.nan, arr.round()),
            "cancelled": cancelled,
        }
    )
    df = df.sort_values(["flight_date", "sched_dep_hour"], kind="stable").reset_index(drop=True)
    df.insert(0, "flight_id", [f"F{i:05d}" for i in range(1, n + 1)])
    return df


def make_sensors(rng: np.random.Generator, days: int = 21) -> pd.DataFrame:
    """Hourly environmental readings from four sites, with dropouts."""
    sites = {"Harbor": 14.0, "Airport": 16.5, "Downtown": 18.0, "Hills": 11.5}
    times = pd.date_range("2024-03-01", periods=days * 24, freq="h")
    frames = []
    for site, base in sites.items():
        hours = np.arange(len(times))
        temp = (
            base
            + 5 * np.sin((hours % 24 - 9) / 24 * 2 * np.pi)
            + hours / 100
            + rng.normal(0, 1.2, len(times))
        )
        hum = (75 - 1.8 * (temp - base) + rng.normal(0, 6, len(times))).clip(5, 100)
        frames.append(
            pd.DataFrame(
                {
                    "timestamp": times.strftime("%Y-%m-%d %H:%M"),
                    "site": site,
                    "temperature_c": temp.round(2),
                    "humidity_pct": hum.round(1),
                    "pressure_hpa": (1013 + rng.normal(0, 4, len(times))).round(1),
                }
            )
        )
    df = pd.concat(frames, ignore_index=True)
    gaps = rng.random(len(df)) < 0.02
    df.loc[gaps, "temperature_c"] = np.nan
    df = df.sort_values(["timestamp", "site"], kind="stable").reset_index(drop=True)
    return df
