"""What the starter set's synthetic tables share: category pools, names and seeded draws.

The table makers (``csv_tables``, ``sqlite_tables`` and ``excel_tables`` for
the tidy files, ``messy_tables`` for the files with real-world defects) draw
from these pools with these helpers, so the same regions, categories, cities
and people recur across files, as they do in one company's data. All
randomness comes from the ``numpy.random.Generator`` passed in.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

REGIONS = ["North", "South", "East", "West", "Central"]
CATEGORIES = {
    "Electronics": (80, 900),
    "Furniture": (50, 600),
    "Office Supplies": (2, 40),
    "Clothing": (10, 120),
    "Groceries": (1, 25),
}
FIRST = [
    "Ava",
    "Liam",
    "Noah",
    "Emma",
    "Mia",
    "Omar",
    "Yuki",
    "Ana",
    "Ivan",
    "Lena",
    "Ravi",
    "Chen",
    "Sara",
    "Tomas",
    "Zoe",
    "Amir",
    "Nina",
    "Kofi",
    "Eva",
    "Leo",
    "Maya",
    "Jonas",
    "Priya",
    "Diego",
    "Hana",
    "Felix",
    "Aisha",
    "Marco",
    "Ines",
    "Oscar",
]
LAST = [
    "Smith",
    "Garcia",
    "Kim",
    "Novak",
    "Okafor",
    "Silva",
    "Haddad",
    "Jensen",
    "Rossi",
    "Tanaka",
    "Müller",
    "Patel",
    "Dubois",
    "Cohen",
    "Ivanova",
    "Brown",
    "Lopez",
    "Berg",
]
CITIES = ["Austin", "Boston", "Chicago", "Denver", "Seattle", "Atlanta", "Phoenix", "Miami"]


def mix_weights(rng: np.random.Generator, n: int) -> np.ndarray:
    """Random probabilities for ``n`` categories, uneven but none negligible (each 0.5x-1.5x of the
    mean)."""
    w = rng.uniform(0.5, 1.5, n)
    return w / w.sum()


def random_dates(rng: np.random.Generator, start: str, days: int, n: int) -> pd.Series:
    """``n`` dates as ``YYYY-MM-DD`` text, each uniform over the ``days`` days from ``start``."""
    d = pd.Timestamp(start) + pd.to_timedelta(rng.integers(0, days, n), unit="D")
    return pd.Series(d.strftime("%Y-%m-%d"))


def person_names(rng: np.random.Generator, n: int) -> list[str]:
    """``n`` distinct "First Last" names."""
    pairs = [f"{first} {last}" for first in FIRST for last in LAST]
    idx = rng.choice(len(pairs), size=n, replace=False)
    return [pairs[i] for i in idx]
