"""Result-workbook templates: write ``result.xlsx`` from a CSV file, a SQLite database or a
multi-sheet workbook.

Each template computes the sheets with pandas from the file as read back from
disk and describes them column by column (see ``workbook_draft``). Levels:
easy asks for one per-group summary sheet from one table; medium for a cleaned
(filtered, joined, sorted) table plus a summary of it; hard for a pivot with a
total column plus related sheets that need joins across tables or sheets.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from analyst_env.datasets.shipped.draft import pick, repeat, reuse_last
from analyst_env.datasets.shipped.workbook_draft import Column, Sheet, WorkbookDraft, finish

Template = Callable[[object, np.random.Generator], WorkbookDraft | None]
QUARTERS = ["Q1", "Q2", "Q3", "Q4"]
AZ = "A to Z"


def _pivot(
    df: pd.DataFrame, rows: str, cols: str, values: pd.Series | str, columns: list[str]
) -> pd.DataFrame:
    """Sum pivot with every column in ``columns`` (0 where empty) and a ``Total`` column, rows
    sorted."""
    table = df.assign(_v=df[values] if isinstance(values, str) else values).pivot_table(
        index=rows, columns=cols, values="_v", aggfunc="sum", fill_value=0
    )
    table = table.reindex(columns=columns, fill_value=0)
    table.columns = [str(c) for c in table.columns]
    table["Total"] = table[columns].sum(axis=1)
    return table.sort_index().reset_index()


def _pivot_columns(
    first: str, names: list[str], meaning: Callable[[str], str], decimals: int | None
) -> list[Column]:
    total = "the sum of the row's other value columns" + (
        "" if decimals is None else " (of their unrounded values)"
    )
    return (
        [Column(first, f"the {first}")]
        + [Column(n, meaning(n), decimals) for n in names]
        + [Column("Total", total, decimals)]
    )


# --- sales.csv
# -------------------------------------------------------------------------------------


@repeat(3)
def wb_sales_region_summary(df, rng):
    year, channel = int(pick(rng, df.order_date.str[:4])), pick(rng, df.channel)
    sub = df[df.order_date.str.startswith(str(year)) & (df.channel == channel)]
    g = (
        sub.groupby("region")
        .agg(orders=("order_id", "count"), units=("units", "sum"), revenue=("revenue", "sum"))
        .reset_index()
        .sort_values("region")
    )
    sheet = Sheet(
        "Summary",
        f"one row per region, summarising the orders dated in {year} (order_date) that came "
        f"through the {channel} channel.",
        g,
        [
            Column("region", "the region"),
            Column("orders", "the number of such orders (rows)"),
            Column("units", "their total units"),
            Column("revenue", "their total revenue", 2),
        ],
        f"one per region that has such orders, sorted by region {AZ}",
    )
    return finish(WorkbookDraft("easy", [sheet], {"year": year, "channel": channel}))


@repeat(3)
def wb_sales_clean_monthly(df, rng):
    region, category = pick(rng, df.region), pick(rng, df.category)
    year = int(pick(rng, df.order_date.str[:4]))
    sub = df[
        (df.region == region) & (df.category == category) & df.order_date.str.startswith(str(year))
    ]
    orders = sub.sort_values(["order_date", "order_id"])
    monthly = (
        sub.assign(month=sub.order_date.str[:7])
        .groupby("month")
        .agg(orders=("order_id", "count"), units=("units", "sum"), revenue=("revenue", "sum"))
        .reset_index()
        .sort_values("month")
    )
    what = f"the {category} orders of the {region} region dated in {year}"
    sheets = [
        Sheet(
            "Orders",
            f"{what}, one row per order, values as in the file.",
            orders,
            [
                Column("order_id", "the order id"),
                Column("order_date", "the order date (YYYY-MM-DD text)"),
                Column("channel", "the channel"),
                Column("units", "units"),
                Column("unit_price", "unit price"),
                Column("discount", "discount"),
                Column("revenue", "revenue"),
            ],
            "sorted by order_date, oldest first, then by order_id ascending",
        ),
        Sheet(
            "Monthly",
            f"{what}, summarised per calendar month.",
            monthly,
            [
                Column("month", "the month as text, YYYY-MM"),
                Column("orders", "the number of orders"),
                Column("units", "their total units"),
                Column("revenue", "their total revenue", 2),
            ],
            "one per month that has such orders, oldest first",
        ),
    ]
    return finish(
        WorkbookDraft("medium", sheets, {"region": region, "category": category, "year": year})
    )


@repeat(3)
def wb_sales_channel_pivot(df, rng):
    year, value = int(pick(rng, df.order_date.str[:4])), str(rng.choice(["revenue", "units"]))
    dec = 2 if value == "revenue" else None
    sub = df[df.order_date.str.startswith(str(year))]
    channels = sorted(sub.channel.unique())
    pivot = _pivot(sub, "region", "channel", value, channels)
    per = (
        sub.groupby("channel").agg(orders=("order_id", "count"), total=(value, "sum")).reset_index()
    )
    per["share_pct"] = 100 * per.total / per.total.sum()
    per = per.rename(columns={"total": value}).sort_values(
        [value, "channel"], ascending=[False, True]
    )
    top = (
        sub.sort_values(["revenue", "order_id"], ascending=[False, True])
        .head(10)
        .assign(rank=range(1, 11))
    )
    sheets = [
        Sheet(
            "Pivot",
            f"total {value} of the orders dated in {year}, regions as rows and channels as "
            "columns.",
            pivot,
            _pivot_columns(
                "region",
                channels,
                lambda c: f"total {value} through the {c} channel (0 if none)",
                dec,
            ),
            f"one per region, sorted by region {AZ}",
        ),
        Sheet(
            "Channels",
            f"one row per channel for the orders dated in {year}.",
            per,
            [
                Column("channel", "the channel"),
                Column("orders", "the number of orders"),
                Column(value, f"their total {value}", dec),
                Column(
                    "share_pct",
                    f"the channel's share of the year's total {value}, as a percentage (0-100)",
                    2,
                ),
            ],
            f"largest {value} first; ties by channel {AZ}",
        ),
        Sheet(
            "TopOrders",
            f"the 10 orders dated in {year} with the highest revenue.",
            top,
            [
                Column("rank", "1 for the highest revenue, then 2, 3, ..."),
                Column("order_id", "the order id"),
                Column("order_date", "the order date (YYYY-MM-DD text)"),
                Column("region", "the region"),
                Column("channel", "the channel"),
                Column("revenue", "the order's revenue"),
            ],
            "highest revenue first; ties by order_id ascending",
        ),
    ]
    return finish(WorkbookDraft("hard", sheets, {"year": year, "value": value}))


# --- retail.sqlite
# ---------------------------------------------------------------------------------

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
    pivot = _pivot(done, "city", "category", "line_revenue", categories)
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
            _pivot_columns(
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


# --- financials.xlsx (quarter sheets Q1-Q4 and Targets) -------------------------------------------


@reuse_last
def _year(s) -> pd.DataFrame:
    return pd.concat([s[q].assign(quarter=q) for q in QUARTERS], ignore_index=True)


def _money(g: pd.DataFrame) -> pd.DataFrame:
    return g.assign(profit=g.revenue - g.cost)


MONEY = [
    Column("units", "total units"),
    Column("revenue", "total revenue", 2),
    Column("cost", "total cost", 2),
    Column("profit", "revenue minus cost", 2),
]


@repeat(3)
def wb_fin_quarter_regions(s, rng):
    q = str(rng.choice(QUARTERS))
    g = _money(
        s[q]
        .groupby("region")[["units", "revenue", "cost"]]
        .sum()
        .reset_index()
        .sort_values("region")
    )
    sheet = Sheet(
        "Regions",
        f"one row per region, totals over the rows of the {q} sheet.",
        g,
        [Column("region", "the region"), *MONEY],
        f"sorted by region {AZ}",
    )
    return finish(WorkbookDraft("easy", [sheet], {"quarter": q}))


@repeat(3)
def wb_fin_region_lines(s, rng):
    region = pick(rng, s["Q1"].region)
    y = _year(s)
    y = y[y.region == region]
    lines = _money(y.groupby("product_line")[["units", "revenue", "cost"]].sum().reset_index())
    lines = lines.sort_values(["profit", "product_line"], ascending=[False, True])
    quarters = _money(
        y.groupby("quarter")[["revenue", "cost"]].sum().reindex(QUARTERS).reset_index()
    )
    quarters["margin_pct"] = 100 * quarters.profit / quarters.revenue
    sheets = [
        Sheet(
            "Lines",
            f"one row per product line for the {region} region, totals over all four "
            "quarter sheets (Q1, Q2, Q3, Q4).",
            lines,
            [Column("product_line", "the product line"), *MONEY],
            f"largest profit first; ties by product_line {AZ}",
        ),
        Sheet(
            "Quarters",
            f"one row per quarter sheet for the {region} region.",
            quarters,
            [
                Column("quarter", "the quarter sheet's name (Q1 ... Q4)"),
                Column("revenue", "total revenue", 2),
                Column("cost", "total cost", 2),
                Column("profit", "revenue minus cost", 2),
                Column(
                    "margin_pct", "profit as a percentage of revenue (100 * profit / revenue)", 2
                ),
            ],
            "Q1, Q2, Q3, Q4 in that order",
        ),
    ]
    return finish(WorkbookDraft("medium", sheets, {"region": region}))


@repeat(3)
def wb_fin_pivot_targets(s, rng):
    value = str(rng.choice(["revenue", "profit", "units"]))
    dec = None if value == "units" else 2
    y = _money(_year(s))
    pivot = _pivot(y, "region", "quarter", value, QUARTERS)
    meaning = "revenue minus cost" if value == "profit" else value
    t = s["Targets"].rename(columns={"annual_revenue_target": "target"})
    tg = y.groupby("region").revenue.sum().rename("revenue").reset_index().merge(t, on="region")
    tg["gap"] = tg.revenue - tg.target
    tg["attainment_pct"] = 100 * tg.revenue / tg.target
    tg["met"] = np.where(tg.revenue >= tg.target, "yes", "no")
    tg = tg.sort_values(["gap", "region"], ascending=[False, True])
    sheets = [
        Sheet(
            "Pivot",
            f"total {value} ({meaning}) per region and quarter sheet, regions as rows and "
            "the quarter sheets Q1, Q2, Q3, Q4 as columns.",
            pivot,
            _pivot_columns(
                "region", QUARTERS, lambda q: f"the region's total {value} on the {q} sheet", dec
            ),
            f"one per region, sorted by region {AZ}",
        ),
        Sheet(
            "Targets",
            "one row per region of the Targets sheet, its annual revenue (all four quarter sheets) "
            "against its annual_revenue_target.",
            tg,
            [
                Column("region", "the region"),
                Column("revenue", "annual revenue", 2),
                Column("target", "annual_revenue_target from the Targets sheet", 2),
                Column("gap", "revenue minus target (negative when short)", 2),
                Column("attainment_pct", "100 * revenue / target", 1),
                Column("met", "the text yes if revenue >= target, else no"),
            ],
            f"largest gap first; ties by region {AZ}",
        ),
    ]
    return finish(WorkbookDraft("hard", sheets, {"value": value}))


# --- inventory.xlsx (Products, Stock, Warehouses)
# --------------------------------------------------


@reuse_last
def _stock(s) -> pd.DataFrame:
    df = s["Stock"].merge(s["Products"], on="sku").merge(s["Warehouses"], on="warehouse")
    return df.assign(value=df.quantity * df.unit_cost)


@repeat(3)
def wb_inv_category_warehouses(s, rng):
    category = pick(rng, s["Products"].category)
    df = _stock(s)
    sub = df[(df.category == category) & (df.quantity > 0)]
    g = sub.groupby("warehouse").agg(skus=("sku", "nunique"), units=("quantity", "sum"))
    g = (
        s["Warehouses"][["warehouse", "city"]]
        .merge(g.reset_index(), on="warehouse", how="left")
        .fillna(0)
    )
    g = g.astype({"skus": int, "units": int}).sort_values("warehouse")
    sheet = Sheet(
        "Warehouses",
        f"one row per warehouse of the Warehouses sheet, for the stock of products in the "
        f"{category} category (Stock rows joined to Products on sku).",
        g,
        [
            Column("warehouse", "the warehouse"),
            Column("city", "its city"),
            Column(
                "skus",
                f"the number of distinct {category} SKUs with quantity > 0 there (0 if none)",
            ),
            Column("units", f"the total quantity of {category} products there (0 if none)"),
        ],
        f"every warehouse, sorted by warehouse {AZ}",
    )
    return finish(WorkbookDraft("easy", [sheet], {"category": category}))


@repeat(3)
def wb_inv_warehouse_stock(s, rng):
    wh = pick(rng, s["Warehouses"].warehouse)
    df = _stock(s)
    sub = df[df.warehouse == wh].sort_values(["value", "sku"], ascending=[False, True])
    cats = (
        sub.groupby("category")
        .agg(skus=("sku", "nunique"), units=("quantity", "sum"), value=("value", "sum"))
        .reset_index()
        .sort_values("category")
    )
    sheets = [
        Sheet(
            "Stock",
            f"every Stock row of warehouse {wh}, with the product's details from the "
            "Products sheet.",
            sub,
            [
                Column("sku", "the SKU"),
                Column("product_name", "the product name"),
                Column("category", "its category"),
                Column("supplier", "its supplier"),
                Column("quantity", "the stocked quantity"),
                Column("unit_cost", "the unit cost"),
                Column("value", "quantity * unit_cost", 2),
            ],
            f"largest value first; ties by sku {AZ}",
        ),
        Sheet(
            "Categories",
            f"one row per product category stocked in warehouse {wh}.",
            cats,
            [
                Column("category", "the category"),
                Column("skus", "the number of distinct SKUs"),
                Column("units", "the total quantity"),
                Column("value", "the total quantity * unit_cost", 2),
            ],
            f"sorted by category {AZ}",
        ),
    ]
    return finish(WorkbookDraft("medium", sheets, {"warehouse": wh}))


@repeat(3)
def wb_inv_pivot_reorder(s, rng):
    supplier, limit = pick(rng, s["Products"].supplier), int(rng.choice([150, 250, 350]))
    df = _stock(s)
    warehouses = sorted(s["Warehouses"].warehouse)
    pivot = _pivot(df, "category", "warehouse", "value", warehouses)
    pivot = (
        pd.DataFrame({"category": sorted(s["Products"].category.unique())})
        .merge(pivot, on="category", how="left")
        .fillna(0)
    )
    used = df.groupby("warehouse").quantity.sum()
    util = s["Warehouses"][["warehouse", "capacity_units"]].copy()
    util["units"] = util.warehouse.map(used).fillna(0).astype(int)
    util["utilization_pct"] = 100 * util.units / util.capacity_units
    util = util.sort_values("warehouse")
    totals = df.groupby("sku").quantity.sum()
    p = s["Products"][s["Products"].supplier == supplier].copy()
    p["total_quantity"] = p.sku.map(totals).fillna(0).astype(int)
    low = p[p.total_quantity < limit].sort_values(["total_quantity", "sku"])
    sheets = [
        Sheet(
            "Pivot",
            "stock value (quantity * unit_cost from the Products sheet) per product category and "
            "warehouse, categories as rows and warehouses as columns.",
            pivot,
            _pivot_columns(
                "category",
                warehouses,
                lambda w: f"the category's stock value in {w} (0 if none)",
                2,
            ),
            f"one per category of the Products sheet, sorted by category {AZ}",
        ),
        Sheet(
            "Utilization",
            "one row per warehouse of the Warehouses sheet.",
            util,
            [
                Column("warehouse", "the warehouse"),
                Column("capacity_units", "its capacity_units"),
                Column("units", "the total quantity stocked there"),
                Column("utilization_pct", "100 * units / capacity_units", 2),
            ],
            f"sorted by warehouse {AZ}",
        ),
        Sheet(
            "Reorder",
            f"the SKUs supplied by {supplier} whose total quantity over all warehouses is below "
            f"{limit} (a SKU with no Stock rows counts as 0).",
            low,
            [
                Column("sku", "the SKU"),
                Column("product_name", "the product name"),
                Column("category", "its category"),
                Column("total_quantity", "its total quantity over all warehouses"),
            ],
            f"lowest total_quantity first; ties by sku {AZ}",
        ),
    ]
    return finish(WorkbookDraft("hard", sheets, {"supplier": supplier, "below": limit}))


TEMPLATES: dict[str, list[Template]] = {
    "sales": [wb_sales_region_summary, wb_sales_clean_monthly, wb_sales_channel_pivot],
    "retail": [wb_retail_segment_cities, wb_retail_city_categories, wb_retail_segment_pivot],
    "financials": [wb_fin_quarter_regions, wb_fin_region_lines, wb_fin_pivot_targets],
    "inventory": [wb_inv_category_warehouses, wb_inv_warehouse_stock, wb_inv_pivot_reorder],
}
