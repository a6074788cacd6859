"""Result-workbook templates over ``retail.sqlite``: segment cities, city categories, a pivot.

The sheets need joins across the database's tables (order items, orders,
products, customers); line revenues are summed at 4 decimals (``CENTS_X_DISCOUNT``).

Each template computes the sheets with pandas from the file as read back from
disk and describes them column by column (see ``workbook_draft``), one template
per level: easy asks for one per-group summary sheet from one table; medium for
a cleaned (filtered, joined, sorted) table plus a summary of it; hard for a
pivot with a total column plus related sheets. ``TEMPLATES`` is their order in
the starter set (``starter.WORKBOOK_SOURCES``): append only, so the ids of
existing tasks stay put.
"""

from __future__ import annotations

import pandas as pd

from analyst_env.datasets.shipped.draft import pick, repeat, reuse_last
from analyst_env.datasets.shipped.workbook_common import (
    AZ,
    Template,
    pivot_columns,
    pivot_with_total,
)
from analyst_env.datasets.shipped.workbook_draft import Column, Sheet, WorkbookDraft, finish

LINE_REVENUE = (
    "line revenue = order_items.quantity * products.unit_price * (1 - order_items.discount)"
)
CENTS_X_DISCOUNT = 4
"""Decimals of a line revenue sum: exact at 4 places (cents times a 2-place discount), so rounding
there only
drops float noise, while rounding to cents would hit exact half-cents that programs round either
way."""


@reuse_last
def _lines(db) -> pd.DataFrame:
    df = (
        db["order_items"]
        .merge(db["orders"], on="order_id")
        .merge(db["products"], on="product_id")
        .merge(db["customers"].rename(columns={"name": "customer_name"}), on="customer_id")
    )
    return df.assign(line_revenue=df.quantity * df.unit_price * (1 - df.discount))


@repeat(3)
def wb_retail_segment_cities(db, rng):
    segment = pick(rng, db["customers"].segment)
    c = db["customers"][db["customers"].segment == segment]
    g = (
        c.groupby("city")
        .agg(
            customers=("customer_id", "count"),
            first_signup=("signup_date", "min"),
            last_signup=("signup_date", "max"),
        )
        .reset_index()
        .sort_values(["customers", "city"], ascending=[False, True])
    )
    sheet = Sheet(
        "Cities",
        f"one row per city for the customers of the {segment} segment (customers table).",
        g,
        [
            Column("city", "the city"),
            Column("customers", "the number of such customers"),
            Column("first_signup", "their earliest signup_date (YYYY-MM-DD text)"),
            Column("last_signup", "their latest signup_date (YYYY-MM-DD text)"),
        ],
        f"most customers first; ties by city {AZ}",
    )
    return finish(WorkbookDraft("easy", [sheet], {"segment": segment}))


@repeat(3)
def wb_retail_city_categories(db, rng):
    year, city = int(pick(rng, db["orders"].order_date.str[:4])), pick(rng, db["customers"].city)
    lines = _lines(db)
    mine = lines[lines.order_date.str.startswith(str(year)) & (lines.city == city)]
    done = mine[mine.status == "completed"]
    cats = (
        done.groupby("category")
        .agg(
            orders=("order_id", "nunique"),
            items=("quantity", "sum"),
            revenue=("line_revenue", "sum"),
        )
        .reset_index()
        .sort_values(["revenue", "category"], ascending=[False, True])
    )
    o = db["orders"].merge(db["customers"], on="customer_id")
    o = o[o.order_date.str.startswith(str(year)) & (o.city == city)]
    status = (
        o.groupby("status").agg(orders=("order_id", "count")).reset_index().sort_values("status")
    )
    who = f"the orders dated in {year} (orders.order_date) of customers located in {city}"
    sheets = [
        Sheet(
            "Categories",
            f"one row per product category, over the completed ones (status 'completed') of {who}; "
            f"{LINE_REVENUE}.",
            cats,
            [
                Column("category", "the product category"),
                Column(
                    "orders", "the number of distinct orders with at least one item of the category"
                ),
                Column("items", "the total quantity of its items"),
                Column("revenue", "the total line revenue", CENTS_X_DISCOUNT),
            ],
            f"largest revenue first; ties by category {AZ}",
        ),
        Sheet(
            "Status",
            f"one row per order status, over all of {who}, whatever their status.",
            status,
            [Column("status", "the status"), Column("orders", "the number of orders")],
            f"sorted by status {AZ}",
        ),
    ]
    return finish(WorkbookDraft("medium", sheets, {"year": year, "city": city}))


@repeat(3)
def wb_retail_segment_pivot(db, rng):
    segment, year = (
        pick(rng, db["customers"].segment),
        int(pick(rng, db["orders"].order_date.str[:4])),
    )
    lines = _lines(db)
    dated = lines.order_date.str.startswith(str(year))
    done = lines[(lines.status == "completed") & (lines.segment == segment) & dated]
    categories = sorted(db["products"].category.unique())
    pivot = pivot_with_total(done, "city", "category", "line_revenue", categories)
    top = (
        done.groupby(["customer_id", "customer_name", "city"])
        .agg(orders=("order_id", "nunique"), revenue=("line_revenue", "sum"))
        .reset_index()
        .rename(columns={"customer_name": "name"})
        .sort_values(["revenue", "customer_id"], ascending=[False, True])
        .head(5)
    )
    scope = (
        f"the completed orders (status 'completed') dated in {year} of customers in the "
        f"{segment} segment"
    )
    sheets = [
        Sheet(
            "Pivot",
            f"line revenue of {scope}, customer cities as rows and product categories as columns; "
            f"{LINE_REVENUE}.",
            pivot,
            pivot_columns(
                "city",
                categories,
                lambda c: f"total line revenue of {c} products (0 if none)",
                CENTS_X_DISCOUNT,
            ),
            f"one per city with at least one such order, sorted by city {AZ}",
        ),
        Sheet(
            "TopCustomers",
            f"the 5 customers with the highest total line revenue over {scope}.",
            top,
            [
                Column("customer_id", "the customer id"),
                Column("name", "the customer's name"),
                Column("city", "the customer's city"),
                Column("orders", "the number of their such orders"),
                Column("revenue", "their total line revenue", CENTS_X_DISCOUNT),
            ],
            "highest revenue first; ties by customer_id ascending",
        ),
    ]
    return finish(WorkbookDraft("hard", sheets, {"segment": segment, "year": year}))


TEMPLATES: list[Template] = [
    wb_retail_segment_cities,
    wb_retail_city_categories,
    wb_retail_segment_pivot,
]
