"""Result-workbook templates over ``inventory.xlsx``: the Products, Stock and Warehouses sheets.

A category's stock per warehouse, one warehouse's stock with product details,
and a category-by-warehouse value pivot with utilization and a reorder list:
every sheet joins Stock to Products (and Warehouses) by key.

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
    pivot = pivot_with_total(df, "category", "warehouse", "value", warehouses)
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
            pivot_columns(
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


TEMPLATES: list[Template] = [
    wb_inv_category_warehouses,
    wb_inv_warehouse_stock,
    wb_inv_pivot_reorder,
]
