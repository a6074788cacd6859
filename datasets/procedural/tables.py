"""One task's data: clean tables drawn from its seed, then written with the defects it asks for.

``draw`` makes the truth (a fact table and its dimension table, every value
typed); ``Mess`` says which real-world defects the written files carry
(blank cells, numbers as text, duplicate records, mixed date formats, dates
written as local timestamps from several time zones, mixed units, keys missing
from the dimension table). The reference answer is never
computed from the truth: it is computed from the files as written, read back
(see ``readers``), so a defect that changes the answer changes the gold too.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from analyst_env.datasets.procedural.domain_schema import Domain, Measure

ALT_UNITS = {  # base unit -> (base abbreviation, other abbreviation, other units per base unit)
    "kilograms": ("kg", "g", 1000),
    "dollars": ("USD", "cents", 100),
    "hours": ("h", "min", 60),
    "kilometers": ("km", "m", 1000),
    "liters": ("L", "mL", 1000),
    "kilowatt-hours": ("kWh", "Wh", 1000),
    "seconds": ("s", "ms", 1000),
    "tonnes": ("t", "kg", 1000),
}


@dataclass(frozen=True)
class Mess:
    """The defects of one task's files (all off is a tidy file)."""

    missing: bool = False  # some m1 cells blank
    text_numbers: bool = False  # m1 written as text with thousands separators (and $ for dollars)
    duplicates: bool = False  # some records repeated exactly
    mixed_dates: bool = False  # some dates written DD/MM/YYYY instead of YYYY-MM-DD
    units: bool = False  # m1 recorded in two units, named by a unit column
    orphans: bool = False  # some keys of the fact table are missing from the dimension table
    timezones: bool = False  # dates written as local timestamps with their UTC offsets

    def names(self) -> list[str]:
        return [k for k, v in self.__dict__.items() if v]


TZ_OFFSETS_MIN = (-480, -300, -240, 0, 60, 330, 540)
"""UTC offsets (minutes east) of the sites a ``timezones`` file's records come from."""


def unit_col(domain: Domain) -> str:
    return f"{domain.m1.name}_unit"


def _draw_measure(rng: np.random.Generator, m: Measure, n: int) -> np.ndarray:
    kind, *p = m.dist
    if kind == "lognormal":
        x = rng.lognormal(p[0], p[1], n)
    elif kind == "normal":
        x = np.abs(rng.normal(p[0], p[1], n))
    elif kind == "uniform":
        x = rng.uniform(p[0], p[1], n)
    else:
        x = rng.poisson(p[0], n).astype(float)
    return np.round(x, m.decimals)


@dataclass
class Truth:
    """The clean tables and the vocabulary they use."""

    fact: pd.DataFrame
    dim: pd.DataFrame
    domain: Domain


def draw(domain: Domain, rng: np.random.Generator, n_rows: int) -> Truth:
    """Clean fact and dimension tables; pools, skew, correlation and date span all drawn from
    ``rng``."""
    g1_pool = list(domain.g1[1])[: int(rng.integers(3, len(domain.g1[1]) + 1))]
    g2_pool = list(domain.g2[1])
    n_keys = int(rng.integers(max(4, n_rows // 12), max(6, n_rows // 3) + 1))
    keys = [f"{domain.key_prefix}{k:04d}" for k in rng.choice(9000, n_keys, replace=False) + 1000]
    w1 = rng.dirichlet(np.full(len(g1_pool), 1.5))
    w2 = rng.dirichlet(np.full(len(g2_pool), 2.0))
    start = dt.date(int(rng.integers(2019, 2025)), int(rng.integers(1, 13)), 1)
    span = int(rng.integers(180, 540))
    days = np.sort(rng.integers(0, span, n_rows))
    g1 = rng.choice(len(g1_pool), n_rows, p=w1)
    lift = rng.uniform(
        0.6, 1.6, len(g1_pool)
    )  # groups differ in level, so group questions have answers
    m1 = _draw_measure(rng, domain.m1, n_rows) * lift[g1]
    m1 = np.round(m1, domain.m1.decimals)
    rho = float(rng.uniform(-0.9, 0.9))
    m2 = _draw_measure(rng, domain.m2, n_rows)
    z1 = (m1 - m1.mean()) / (m1.std() or 1.0)
    m2 = np.round(np.abs(m2 + rho * z1 * (m2.std() or 1.0)), domain.m2.decimals)
    ids = np.arange(1, n_rows + 1) + int(rng.integers(1, 9)) * 1000
    g1_texts, g2_texts, key_texts = (np.array(x, dtype=object) for x in (g1_pool, g2_pool, keys))
    fact = pd.DataFrame(
        {
            domain.id_col: ids,
            domain.date_col: _text(_day_labels(start, span)[days]),
            domain.g1[0]: _text(g1_texts[g1]),
            domain.g2[0]: _text(g2_texts[rng.choice(len(g2_pool), n_rows, p=w2)]),
            domain.key: _text(key_texts[rng.integers(0, n_keys, n_rows)]),
            domain.m1.name: m1,
            domain.m2.name: m2.astype(int) if domain.m2.decimals == 0 else m2,
        }
    )
    attr_pool = np.array(domain.attr[1], dtype=object)
    dim = pd.DataFrame(
        {
            domain.key: _text(sorted(keys)),
            domain.attr[0]: _text(attr_pool[rng.integers(0, len(attr_pool), n_keys)]),
        }
    )
    return Truth(fact, dim, domain)


def _day_labels(start: dt.date, span: int) -> np.ndarray:
    """``start + k`` days as ISO text for every ``k`` below ``span``: a table's days repeat,
    so each label is made once and picked by index."""
    return np.array([(start + dt.timedelta(days=k)).isoformat() for k in range(span)], dtype=object)


def _text(values: Any) -> pd.Series:
    """Text cells as Python strings (object dtype), not pandas' default Arrow-backed strings:
    the generator reads them back cell by cell, which Arrow makes several times slower. The
    files written are the same."""
    return pd.Series(values, dtype=object)


def _text_number(value: float, decimals: int, dollars: bool) -> str:
    body = f"{value:,.{decimals}f}"
    return ("$" + body) if dollars else body


def _local_timestamps(days: pd.Series, rng: np.random.Generator) -> list[str]:
    """Each record's UTC day as an instant in it, written in the local time of one of 2-4 sites.

    A record late in the UTC day written at a site east of UTC (or early, west of it)
    shows the next (previous) calendar day: only its UTC reading gives the true day.

    Example:
        >>> import numpy as np
        >>> out = _local_timestamps(pd.Series(["2024-03-05"] * 3), np.random.default_rng(0))
        >>> all(dt.datetime.fromisoformat(s).astimezone(dt.timezone.utc).date().isoformat()
        ...     == "2024-03-05" for s in out)
        True
    """
    sites = rng.choice(TZ_OFFSETS_MIN, int(rng.integers(2, 5)), replace=False)
    seconds = rng.integers(0, 86_400, len(days))
    offsets = rng.choice(sites, len(days))
    utc = np.asarray(days, dtype=str).astype("datetime64[D]").astype("datetime64[s]") + seconds
    wall = np.datetime_as_string(utc + offsets * 60, unit="s")  # the site's clock, no offset
    return [f"{clock}{_OFFSET_TEXT[int(offset)]}" for clock, offset in zip(wall, offsets)]


_OFFSET_TEXT = {
    minutes: f"{'-' if minutes < 0 else '+'}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
    for minutes in TZ_OFFSETS_MIN
}
"""Each site's offset as ``isoformat`` writes it after the time (``+05:30``, ``-08:00``)."""


def apply_mess(
    truth: Truth, mess: Mess, rng: np.random.Generator
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The fact and dimension tables as they will be written, defects included."""
    d = truth.domain
    fact, dim = truth.fact.copy(), truth.dim.copy()
    n = len(fact)
    m1 = fact[d.m1.name].astype(float).to_numpy()
    if mess.units and d.m1.unit in ALT_UNITS:
        base, other, factor = ALT_UNITS[d.m1.unit]
        alt = rng.random(n) < rng.uniform(0.15, 0.4)
        m1 = np.where(alt, np.round(m1 * factor, d.m1.decimals), m1)
        fact[unit_col(d)] = np.where(alt, other, base)
    cells: list[object] = list(m1)
    if mess.text_numbers:
        cells = [_text_number(v, d.m1.decimals, d.m1.unit == "dollars") for v in m1]
    if mess.missing:
        for i in rng.choice(n, max(1, int(n * rng.uniform(0.03, 0.1))), replace=False):
            cells[i] = None
    fact[d.m1.name] = pd.Series(cells, dtype=object) if (mess.text_numbers or mess.missing) else m1
    if mess.mixed_dates:
        flip = rng.random(n) < rng.uniform(0.2, 0.5)
        fact[d.date_col] = [
            dt.date.fromisoformat(s).strftime("%d/%m/%Y") if f else s
            for s, f in zip(fact[d.date_col], flip)
        ]
    if mess.timezones:
        fact[d.date_col] = _local_timestamps(fact[d.date_col], rng)
    if mess.duplicates:
        extra = rng.choice(n, max(1, int(n * rng.uniform(0.02, 0.06))), replace=False)
        fact = pd.concat([fact, fact.iloc[extra]], ignore_index=True)
        fact = fact.iloc[rng.permutation(len(fact))].reset_index(drop=True)
    if mess.orphans:
        drop = rng.choice(len(dim), max(1, len(dim) // 10), replace=False)
        dim = dim.drop(index=dim.index[drop]).reset_index(drop=True)
    return fact, dim
