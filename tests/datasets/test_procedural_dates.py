"""The generator's date text: what ``datetime`` would write, made in bulk.

``tables`` writes a table's days and a ``timezones`` file's local timestamps with numpy
and per-day labels instead of one ``datetime`` per row; the text must stay exactly what
``date.isoformat`` and an aware ``datetime.isoformat`` write, since the files, their
answers and every cached task depend on it.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from analyst_env.datasets.procedural import tables


def local_timestamps_one_by_one(days: pd.Series, rng: np.random.Generator) -> list[str]:
    """The same draws as ``tables._local_timestamps``, each written by ``datetime``."""
    sites = rng.choice(tables.TZ_OFFSETS_MIN, int(rng.integers(2, 5)), replace=False)
    seconds = rng.integers(0, 86_400, len(days))
    offsets = rng.choice(sites, len(days))
    out = []
    for day, second, offset in zip(days, seconds, offsets):
        utc = dt.datetime.fromisoformat(str(day)).replace(tzinfo=dt.UTC)
        local = dt.timezone(dt.timedelta(minutes=int(offset)))
        out.append((utc + dt.timedelta(seconds=int(second))).astimezone(local).isoformat())
    return out


@pytest.mark.parametrize("seed", range(40))
def test_local_timestamps_are_what_datetime_writes(seed: int) -> None:
    draw = np.random.default_rng(seed)
    days = pd.Series(
        [
            (dt.date(2019, 1, 1) + dt.timedelta(days=int(k))).isoformat()
            for k in draw.integers(0, 2500, 300)
        ],
        dtype=object,
    )
    made = tables._local_timestamps(days, np.random.default_rng(seed + 1000))
    assert made == local_timestamps_one_by_one(days, np.random.default_rng(seed + 1000))
    assert {s[-6:] for s in made} <= {
        f"{'-' if m < 0 else '+'}{abs(m) // 60:02d}:{abs(m) % 60:02d}"
        for m in tables.TZ_OFFSETS_MIN
    }


def test_day_labels_are_iso_days_from_the_start() -> None:
    start = dt.date(2023, 12, 30)  # across a year end and a leap day
    labels = tables._day_labels(start, 800)
    assert list(labels) == [(start + dt.timedelta(days=k)).isoformat() for k in range(800)]
    assert labels[61] == "2024-02-29"
