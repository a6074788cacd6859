"""Question templates over ``sales.csv``: the retail order lines of 2022-2023.

Filters, totals, shares, medians and correlations by region, channel and
category, ranks of regions, categories and months; appended later, running
totals, month-over-month changes, a region-by-channel pivot and ranks within
a region. The table comes from ``csv_tables.make_sales``.

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
    members,
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


def sales_region_year_total(df, rng):
    r, y = _pick(rng, df.region), int(rng.choice([2022, 2023]))
    v = df[(df.region == r) & df.order_date.str.startswith(str(y))].revenue.sum()
    return number(
        f"What was the total revenue of orders in the {r} region in {y}?",
        v,
        2,
        "easy",
        region=r,
        year=y,
    )


def sales_discounted_count(df, rng):
    c = _pick(rng, df.category)
    v = ((df.category == c) & (df.discount > 0)).sum()
    return integer(f"How many {c} orders were sold with a discount?", v, "easy", category=c)


def sales_channel_mean_units(df, rng):
    ch = _pick(rng, df.channel)
    v = df[df.channel == ch].units.mean()
    return number(
        f"What is the average number of units per order for the {ch} channel?",
        v,
        2,
        "easy",
        channel=ch,
    )


def sales_top_regions(df, rng):
    y = int(rng.choice([2022, 2023]))
    top = top_labels(df[df.order_date.str.startswith(str(y))].groupby("region").revenue.sum(), 3)
    return top and members(
        f"Which 3 regions had the highest total revenue in {y}?",
        top,
        "region names",
        "medium",
        year=y,
    )


def sales_category_units_rank(df, rng):
    top = top_labels(df.groupby("category").units.sum(), df.category.nunique())
    return top and ranking(
        "Rank all product categories by total units sold.",
        top,
        "category names",
        "from most to fewest units",
        "medium",
    )


def sales_best_month(df, rng):
    r = _pick(rng, df.region)
    sub = df[df.region == r]
    top = top_labels(sub.groupby(sub.order_date.str[:7]).revenue.sum(), 1)
    return top and text(
        f"In which month did the {r} region have its highest total revenue?",
        top[0],
        "month in YYYY-MM form",
        "medium",
        region=r,
    )


def sales_online_share(df, rng):
    y = int(rng.choice([2022, 2023]))
    sub = df[df.order_date.str.startswith(str(y))]
    v = 100 * sub[sub.channel == "Online"].revenue.sum() / sub.revenue.sum()
    return number(
        f"What percentage of {y} revenue came from the Online channel (a percentage between "
        "0 and 100)?",
        v,
        2,
        "medium",
        year=y,
    )


def sales_median_order(df, rng):
    c = _pick(rng, df.category)
    return number(
        f"What is the median revenue of a single {c} order?",
        df[df.category == c].revenue.median(),
        2,
        "easy",
        category=c,
    )


def sales_repeat_customers(df, rng):
    y22 = set(df[df.order_date.str.startswith("2022")].customer_id)
    y23 = set(df[df.order_date.str.startswith("2023")].customer_id)
    return integer(
        "How many distinct customers placed orders in both 2022 and 2023?", len(y22 & y23), "hard"
    )


def sales_date_range(df, rng):
    c = _pick(rng, df.category)
    start = pd.Timestamp("2022-01-01") + pd.Timedelta(days=int(rng.integers(0, 600)))
    end = start + pd.Timedelta(days=int(rng.integers(30, 120)))
    s, e = start.strftime("%Y-%m-%d"), end.strftime("%Y-%m-%d")
    d = pd.to_datetime(df.order_date)
    v = df[(df.category == c) & (d >= s) & (d <= e)].revenue.sum()
    return number(
        f"What was the total {c} revenue for orders dated from {s} to {e}, both days included?",
        v,
        2,
        "medium",
        category=c,
        start=s,
        end=e,
    )


def sales_price_std(df, rng):
    c = _pick(rng, df.category)
    v = df[df.category == c].unit_price.std()
    return number(
        f"What is the sample standard deviation of unit_price for {c} orders?",
        v,
        2,
        "medium",
        category=c,
    )


def sales_units_revenue_corr(df, rng):
    c = _pick(rng, df.category)
    sub = df[df.category == c]
    v = sub.units.corr(sub.revenue)
    return number(
        f"What is the Pearson correlation between units and revenue for {c} orders?",
        v,
        3,
        "hard",
        category=c,
    )


def sales_region_summary(df, rng):
    r = _pick(rng, df.region)
    sub = df[df.region == r]
    return parts(
        f"For the {r} region, report the number of orders and the average discount in percent.",
        [("order_count", len(sub), 0), ("avg_discount_pct", 100 * sub.discount.mean(), 2)],
        "medium",
        region=r,
    )


# --- window functions, ranks within groups and pivots (appended: earlier ids stay stable) ---


@repeat(3)
def sales_cumulative_cross(df, rng):
    r, y, f = _pick(rng, df.region), int(rng.choice([2022, 2023])), int(rng.choice([25, 50, 75]))
    sub = df[(df.region == r) & df.order_date.str.startswith(str(y))]
    running = sub.groupby(sub.order_date.str[:7]).revenue.sum().sort_index().cumsum()
    month = running[running >= running.iloc[-1] * f / 100].index[0]
    return text(
        f"In which month did the {r} region's running total of {y} revenue (cumulative from "
        f"January) first reach {f}% of its full-year {y} revenue?",
        month,
        "month in YYYY-MM form",
        "hard",
        region=r,
        year=y,
        percent=f,
    )


@repeat(3)
def sales_mom_jump(df, rng):
    c = _pick(rng, df.category)
    sub = df[df.category == c]
    months = pd.period_range("2022-01", "2023-12", freq="M").strftime("%Y-%m")
    monthly = sub.groupby(sub.order_date.str[:7]).revenue.sum().reindex(months, fill_value=0.0)
    change = monthly.diff()
    top = top_labels(change[change.index.str.startswith("2023")], 1)
    return top and text(
        f"Which month of 2023 had the largest increase in {c} revenue over the previous month "
        "(January 2023 is compared with December 2022)?",
        top[0],
        "month in YYYY-MM form",
        "medium",
        category=c,
    )


@repeat(2)
def sales_pivot_gap(df, rng):
    y = int(rng.choice([2022, 2023]))
    sub = df[df.order_date.str.startswith(str(y))]
    pivot = sub.pivot_table(
        index="region", columns="channel", values="revenue", aggfunc="sum", fill_value=0
    )
    top = top_labels(pivot["Online"] - pivot["Store"], 1)
    return top and text(
        f"Make a pivot table of {y} revenue with regions as rows and channels as columns. Which "
        "region has the largest Online minus Store difference?",
        top[0],
        "region name",
        "hard",
        year=y,
    )


@repeat(3)
def sales_rank_in_region(df, rng):
    r, k = _pick(rng, df.region), int(rng.integers(2, 4))
    label = nth_label(df[df.region == r].groupby("category").revenue.sum(), k)
    return label and text(
        f"Within the {r} region, which product category ranks {ORDINAL[k]} by total revenue?",
        label,
        "category name",
        "medium",
        region=r,
        rank=k,
    )


TEMPLATES: list[Template] = [
    sales_region_year_total,
    sales_discounted_count,
    sales_channel_mean_units,
    sales_top_regions,
    sales_category_units_rank,
    sales_best_month,
    sales_online_share,
    sales_median_order,
    sales_repeat_customers,
    sales_date_range,
    sales_price_std,
    sales_units_revenue_corr,
    sales_region_summary,
    sales_cumulative_cross,
    sales_mom_jump,
    sales_pivot_gap,
    sales_rank_in_region,
]
