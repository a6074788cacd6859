"""Question templates over ``transactions.csv``: dirty types, mixed date formats, repeated rows.

The file stores amounts as text (``$1,234.50``, ``1234.50``, ``1,234.50``;
blank or ``N/A`` when unknown), dates in three formats, and repeats some
rows verbatim. Every question says how to treat these, and the reference
answers use the strict parsers in ``cleaning`` on the file as read back.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from analyst_env.datasets.shipped.cleaning import parse_dates, parse_money
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
from analyst_env.datasets.shipped.messy_tables import TXN_DATE_FORMATS

Template = Callable[[pd.DataFrame, np.random.Generator], Draft | None]

ONCE = "Some rows are repeated; count each txn_id only once."
AMOUNT = (
    "The amount column is text that may include a $ sign and comma thousands separators; a "
    "blank or N/A amount is unknown and is left out."
)
DATES = "txn_date mixes three formats: YYYY-MM-DD, MM/DD/YYYY and DD Mon YYYY (e.g. 05 Apr 2023)."


@reuse_last
def _clean(df: pd.DataFrame) -> pd.DataFrame:
    """One row per txn_id, with ``value`` (float amount) and ``day`` (Timestamp) parsed."""
    out = df.drop_duplicates("txn_id").copy()
    out["value"] = parse_money(out.amount)
    out["day"] = parse_dates(out.txn_date, TXN_DATE_FORMATS)
    return out


def tx_distinct_count(df, rng):
    return integer(
        "How many distinct transactions (distinct txn_id values) are in the file?",
        df.txn_id.nunique(),
        "easy",
    )


def tx_repeated_ids(df, rng):
    return integer(
        "How many txn_id values appear on more than one row?",
        int((df.txn_id.value_counts() > 1).sum()),
        "easy",
    )


def tx_missing_amount(df, rng):
    c = _clean(df)
    return integer(
        "How many distinct transactions have no usable amount (the amount is blank or "
        f"N/A)? {ONCE}",
        int(c.value.isna().sum()),
        "easy",
    )


@repeat(4)
def tx_store_total(df, rng):
    s = pick(rng, df.store)
    c = _clean(df)
    return number(
        f"What is the total amount of the {s} store's transactions? {ONCE} {AMOUNT}",
        c[c.store == s].value.sum(),
        2,
        "medium",
        store=s,
    )


@repeat(3)
def tx_store_mean(df, rng):
    s = pick(rng, df.store)
    c = _clean(df)
    return number(
        f"What is the average amount per transaction at the {s} store? {ONCE} {AMOUNT}",
        c[c.store == s].value.mean(),
        2,
        "medium",
        store=s,
    )


@repeat(4)
def tx_month_total(df, rng):
    m = int(rng.integers(1, 13))
    name = pd.Timestamp(2023, m, 1).strftime("%B")
    c = _clean(df)
    v = c[c.day.dt.month == m].value.sum()
    return number(
        f"What is the total amount of transactions dated in {name} 2023? {DATES} {ONCE} {AMOUNT}",
        v,
        2,
        "hard",
        month=m,
    )


@repeat(3)
def tx_payment_missing_share(df, rng):
    cat = pick(rng, df.category)
    c = _clean(df)
    sub = c[c.category == cat]
    v = 100 * sub.payment_method.isna().mean()
    return number(
        f"What percentage of distinct {cat} transactions have no payment_method recorded (an empty "
        f"cell), as a percentage between 0 and 100? {ONCE}",
        v,
        2,
        "medium",
        category=cat,
    )


@repeat(3)
def tx_weekday_top(df, rng):
    s = pick(rng, df.store)
    c = _clean(df)
    sub = c[c.store == s]
    top = top_labels(sub.groupby(sub.day.dt.day_name()).value.sum(), 1)
    return top and text(
        f"On which day of the week did the {s} store take the highest total amount? {DATES} "
        f"{ONCE} {AMOUNT}",
        top[0],
        "English weekday name (e.g. Monday)",
        "hard",
        store=s,
    )


@repeat(3)
def tx_category_units(df, rng):
    cat = pick(rng, df.category)
    c = _clean(df)
    return integer(
        f"How many units (sum of quantity) of {cat} were sold? A blank quantity is unknown "
        f"and left out. {ONCE}",
        int(c[c.category == cat].quantity.sum()),
        "medium",
        category=cat,
    )


@repeat(3)
def tx_large_count(df, rng):
    x = int(rng.choice([250, 500, 1000, 1500, 2000]))
    c = _clean(df)
    return integer(
        f"How many distinct transactions have an amount of at least ${x:,}? {ONCE} {AMOUNT}",
        int((c.value >= x).sum()),
        "medium",
        threshold=x,
    )


TEMPLATES: list[Template] = [
    tx_distinct_count,
    tx_repeated_ids,
    tx_missing_amount,
    tx_store_total,
    tx_store_mean,
    tx_month_total,
    tx_payment_missing_share,
    tx_weekday_top,
    tx_category_units,
    tx_large_count,
]
