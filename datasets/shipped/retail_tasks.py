"""Question templates over ``retail.sqlite``: customers, products, orders and order items.

Order counts and return rates, revenue by city, segment and category over
joined order lines, customers who never ordered and products never sold;
appended later, gaps between a customer's orders, first orders and ranks
within a category.
The database comes from ``sqlite_tables.make_retail_db``.

Templates receive every table of the database (read back from the file) as
pandas frames and compute answers with joins in pandas, so the reference does
not share code or SQL with what an agent would write. ``TEMPLATES`` is their
order in the starter set (``starter.SOURCES``): append only, so the ids of
existing tasks stay put.
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
    ranking,
    repeat,
    reuse_last,
    text,
    top_labels,
)
from analyst_env.datasets.shipped.draft import pick as _pick

Tables = dict[str, pd.DataFrame]
Template = Callable[[Tables, np.random.Generator], Draft | None]


@reuse_last
def _lines(t: Tables) -> pd.DataFrame:
    """Order items joined to orders, customers and products, with line revenue."""
    df = (
        t["order_items"]
        .merge(t["orders"], on="order_id")
        .merge(t["customers"], on="customer_id")
        .merge(t["products"], on="product_id")
    )
    df["line_revenue"] = df.quantity * df.unit_price * (1 - df.discount)
    return df


def rt_completed_orders(t, rng):
    y = int(rng.choice([2022, 2023]))
    o = t["orders"]
    v = ((o.status == "completed") & o.order_date.str.startswith(str(y))).sum()
    return integer(
        f"How many orders with status 'completed' were placed in {y}?", v, "easy", year=y
    )


def rt_city_revenue(t, rng):
    c = _pick(rng, t["customers"].city)
    df = _lines(t)
    v = df[(df.status == "completed") & (df.city == c)].line_revenue.sum()
    return number(
        f"What is the total revenue of completed orders from customers in {c}? Line revenue is "
        "quantity * unit_price * (1 - discount).",
        v,
        2,
        "medium",
        city=c,
    )


def rt_top_customers(t, rng):
    df = _lines(t)
    top = top_labels(df[df.status == "completed"].groupby("name").line_revenue.sum(), 3)
    return top and members(
        "Which 3 customers generated the most revenue from completed orders? Line revenue is "
        "quantity * unit_price * (1 - discount).",
        top,
        "customer names",
        "hard",
    )


def rt_top_category_units(t, rng):
    y = int(rng.choice([2022, 2023]))
    df = _lines(t)
    sub = df[(df.status == "completed") & df.order_date.str.startswith(str(y))]
    top = top_labels(sub.groupby("category").quantity.sum(), 1)
    return top and text(
        f"Which product category sold the most units in completed orders placed in {y}?",
        top[0],
        "category name",
        "medium",
        year=y,
    )


def rt_segment_aov(t, rng):
    s = _pick(rng, t["customers"].segment)
    df = _lines(t)
    per_order = (
        df[(df.status == "completed") & (df.segment == s)].groupby("order_id").line_revenue.sum()
    )
    return number(
        f"What is the average order value of completed orders placed by {s} customers? An "
        "order's value is the sum of quantity * unit_price * (1 - discount) over its items.",
        per_order.mean(),
        2,
        "hard",
        segment=s,
    )


def rt_customers_without_orders(t, rng):
    v = (~t["customers"].customer_id.isin(t["orders"].customer_id)).sum()
    return integer("How many customers have never placed an order?", v, "medium")


def rt_return_rate(t, rng):
    y = int(rng.choice([2022, 2023]))
    o = t["orders"][t["orders"].order_date.str.startswith(str(y))]
    return number(
        f"What percentage of orders placed in {y} have status 'returned' (a percentage "
        "between 0 and 100)?",
        100 * (o.status == "returned").mean(),
        2,
        "medium",
        year=y,
    )


def rt_unsold_products(t, rng):
    v = (~t["products"].product_id.isin(t["order_items"].product_id)).sum()
    return integer("How many products have never appeared in any order item?", v, "medium")


def rt_busiest_month(t, rng):
    y = int(rng.choice([2022, 2023]))
    o = t["orders"][t["orders"].order_date.str.startswith(str(y))]
    top = top_labels(o.groupby(o.order_date.str[:7]).size(), 1)
    return top and text(
        f"Which month of {y} had the most orders (any status)?",
        top[0],
        "month in YYYY-MM form",
        "medium",
        year=y,
    )


def rt_category_rank(t, rng):
    df = _lines(t)
    sub = df[df.status == "completed"]
    top = top_labels(sub.groupby("category").line_revenue.sum(), sub.category.nunique())
    return top and ranking(
        "Rank the product categories by revenue from completed orders, where line revenue is "
        "quantity * unit_price * (1 - discount).",
        top,
        "category names",
        "highest revenue first",
        "hard",
    )


def rt_signup_year_customers(t, rng):
    y = int(rng.integers(2020, 2024))
    c = t["customers"]
    active = c[c.signup_date.str.startswith(str(y))].customer_id
    v = t["orders"][t["orders"].customer_id.isin(active)].order_id.nunique()
    return integer(
        f"How many orders were placed by customers who signed up in {y}?",
        v,
        "medium",
        signup_year=y,
    )


# --- window functions: gaps to the previous row, first rows, ranks within groups (appended) ---


@repeat(3)
def rt_mean_gap_days(t, rng):
    s = _pick(rng, t["customers"].segment)
    o = t["orders"].merge(t["customers"], on="customer_id")
    o = o[o.segment == s].assign(day=lambda d: pd.to_datetime(d.order_date))
    o = o.sort_values(["customer_id", "day", "order_id"], kind="stable")
    gaps = o.groupby("customer_id").day.diff().dropna().dt.days
    return number(
        f"For {s} customers, take the number of days between each order (any status) and the same "
        "customer's previous order. What is the average of these gaps?",
        gaps.mean(),
        2,
        "hard",
        segment=s,
    )


@repeat(3)
def rt_first_order_month(t, rng):
    month = f"2022-{int(rng.integers(1, 13)):02d}"  # by 2023 nearly every customer has ordered
    first = t["orders"].groupby("customer_id").order_date.min()
    return integer(
        f"How many customers placed their first order (any status) in {month}?",
        int(first.str.startswith(month).sum()),
        "medium",
        month=month,
    )


@repeat(3)
def rt_product_rank_in_category(t, rng):
    c, k = _pick(rng, t["products"].category), int(rng.integers(1, 4))
    df = _lines(t)
    sub = df[(df.status == "completed") & (df.category == c)]
    label = nth_label(sub.groupby("product_name").quantity.sum(), k)
    return label and text(
        f"Within the {c} category, which product ranks {ORDINAL[k]} by units sold in completed "
        "orders?",
        label,
        "product name",
        "hard",
        category=c,
        rank=k,
    )


TEMPLATES: list[Template] = [
    rt_completed_orders,
    rt_city_revenue,
    rt_top_customers,
    rt_top_category_units,
    rt_segment_aov,
    rt_customers_without_orders,
    rt_return_rate,
    rt_unsold_products,
    rt_busiest_month,
    rt_category_rank,
    rt_signup_year_customers,
    rt_mean_gap_days,
    rt_first_order_month,
    rt_product_rank_in_category,
]
