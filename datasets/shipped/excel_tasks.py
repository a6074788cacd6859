"""Question templates over the starter set's Excel workbooks.

Templates receive every sheet (read back from the workbook) as pandas frames;
most questions need more than one sheet, as real spreadsheet lookups do.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from analyst_env.datasets.shipped.draft import (
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

Sheets = dict[str, pd.DataFrame]
Template = Callable[[Sheets, np.random.Generator], Draft | None]
QUARTERS = ["Q1", "Q2", "Q3", "Q4"]


@reuse_last
def _year(s: Sheets) -> pd.DataFrame:
    return pd.concat([s[q].assign(quarter=q) for q in QUARTERS], ignore_index=True)


# --- financials.xlsx -------------------------------------------------------------


def fi_region_quarter_revenue(s, rng):
    r, q = _pick(rng, s["Q1"].region), str(rng.choice(QUARTERS))
    v = s[q][s[q].region == r].revenue.sum()
    return number(
        f"What was the total revenue of the {r} region in {q}?", v, 2, "easy", region=r, quarter=q
    )


def fi_line_profit(s, rng):
    p = _pick(rng, s["Q1"].product_line)
    y = _year(s)
    sub = y[y.product_line == p]
    return number(
        "What was the total annual profit (revenue minus cost, summed over all four "
        f"quarter sheets) of the {p} product line?",
        (sub.revenue - sub.cost).sum(),
        2,
        "medium",
        product_line=p,
    )


def fi_top_region(s, rng):
    top = top_labels(_year(s).groupby("region").revenue.sum(), 1)
    return top and text(
        "Which region had the highest total revenue over the whole year (all quarter sheets)?",
        top[0],
        "region name",
        "medium",
    )


def fi_target_met(s, rng):
    actual = _year(s).groupby("region").revenue.sum()
    t = s["Targets"].set_index("region").annual_revenue_target
    met = sorted(r for r in t.index if actual[r] >= t[r])
    if not met:
        return None
    return members(
        "Which regions met or exceeded their annual revenue target (Targets sheet) with "
        "their total revenue across the four quarter sheets?",
        met,
        "region names",
        "hard",
    )


def fi_best_quarter(s, rng):
    p = _pick(rng, s["Q1"].product_line)
    y = _year(s)
    top = top_labels(y[y.product_line == p].groupby("quarter").revenue.sum(), 1)
    return top and text(
        f"In which quarter did the {p} product line have its highest revenue?",
        top[0],
        "quarter sheet name",
        "medium",
        product_line=p,
    )


def fi_region_margin(s, rng):
    r = _pick(rng, s["Q1"].region)
    y = _year(s)
    sub = y[y.region == r]
    v = 100 * (sub.revenue.sum() - sub.cost.sum()) / sub.revenue.sum()
    return number(
        f"What was the annual profit margin of the {r} region, as a percentage of revenue "
        "(profit = revenue - cost, over all four quarters)?",
        v,
        2,
        "medium",
        region=r,
    )


def fi_line_units_rank(s, rng):
    top = top_labels(_year(s).groupby("product_line").units.sum(), s["Q1"].product_line.nunique())
    return top and ranking(
        "Rank the product lines by total units over the whole year.",
        top,
        "product line names",
        "most units first",
        "medium",
    )


def fi_growth(s, rng):
    r = _pick(rng, s["Q1"].region)
    q1 = s["Q1"][s["Q1"].region == r].revenue.sum()
    q4 = s["Q4"][s["Q4"].region == r].revenue.sum()
    return number(
        f"By what percentage did the {r} region's revenue change from Q1 to Q4 "
        "(100 * (Q4 - Q1) / Q1; negative for a decline)?",
        100 * (q4 - q1) / q1,
        2,
        "hard",
        region=r,
    )


def fi_quarter_units(s, rng):
    q, p = str(rng.choice(QUARTERS)), _pick(rng, s["Q1"].product_line)
    v = s[q][s[q].product_line == p].units.sum()
    return integer(
        f"How many units of {p} were sold in {q}, over all regions?",
        v,
        "easy",
        quarter=q,
        product_line=p,
    )


# --- inventory.xlsx ----------------------------------------------------------------


@reuse_last
def _stock(s: Sheets) -> pd.DataFrame:
    return s["Stock"].merge(s["Products"], on="sku").merge(s["Warehouses"], on="warehouse")


def inv_wh_quantity(s, rng):
    w = _pick(rng, s["Warehouses"].warehouse)
    return integer(
        f"How many units in total are stocked in warehouse {w}?",
        s["Stock"][s["Stock"].warehouse == w].quantity.sum(),
        "easy",
        warehouse=w,
    )


def inv_wh_value(s, rng):
    w = _pick(rng, s["Warehouses"].warehouse)
    df = _stock(s)
    sub = df[df.warehouse == w]
    return number(
        f"What is the total inventory value (quantity * unit_cost) held in warehouse {w}?",
        (sub.quantity * sub.unit_cost).sum(),
        2,
        "medium",
        warehouse=w,
    )


def inv_top_supplier(s, rng):
    df = _stock(s)
    top = top_labels((df.quantity * df.unit_cost).groupby(df.supplier).sum(), 1)
    return top and text(
        "Which supplier's products account for the highest total inventory value "
        "(quantity * unit_cost, all warehouses)?",
        top[0],
        "supplier name",
        "hard",
    )


def inv_utilization(s, rng):
    pct = int(rng.choice([40, 50, 60, 70]))
    used = s["Stock"].groupby("warehouse").quantity.sum()
    wh = s["Warehouses"].set_index("warehouse")
    util = 100 * used.reindex(wh.index, fill_value=0) / wh.capacity_units
    hit = sorted(util[util > pct].index)
    if not hit or len(hit) == len(util):
        return None
    return members(
        f"Which warehouses are filled to more than {pct}% of their capacity_units?",
        hit,
        "warehouse names",
        "hard",
        threshold_pct=pct,
    )


def inv_zero_stock(s, rng):
    totals = s["Stock"].groupby("sku").quantity.sum()
    v = (totals.reindex(s["Products"].sku, fill_value=0) == 0).sum()
    return integer(
        "How many SKUs have no units in stock in any warehouse (including SKUs that have "
        "no Stock rows)?",
        v,
        "medium",
    )


def inv_city_category(s, rng):
    c = _pick(rng, s["Warehouses"].city)
    df = _stock(s)
    top = top_labels(df[df.city == c].groupby("category").quantity.sum(), 1)
    return top and text(
        f"Which product category has the most units stocked in the warehouse located in {c}?",
        top[0],
        "category name",
        "medium",
        city=c,
    )


def inv_category_cost(s, rng):
    c = _pick(rng, s["Products"].category)
    p = s["Products"]
    return number(
        f"What is the average unit_cost of products in the {c} category?",
        p[p.category == c].unit_cost.mean(),
        2,
        "easy",
        category=c,
    )


def inv_top_skus(s, rng):
    top = top_labels(s["Stock"].groupby("sku").quantity.sum(), 3)
    return top and ranking(
        "Which 3 SKUs have the most units in stock across all warehouses?",
        top,
        "SKUs",
        "most units first",
        "medium",
    )


def inv_supplier_skus(s, rng):
    sup = _pick(rng, s["Products"].supplier)
    stocked = set(s["Stock"][s["Stock"].quantity > 0].sku)
    p = s["Products"]
    v = p[(p.supplier == sup) & p.sku.isin(stocked)].sku.nunique()
    return integer(
        f"How many of {sup}'s SKUs have at least one unit in stock somewhere?",
        v,
        "medium",
        supplier=sup,
    )


# --- quarter-over-quarter changes, running totals, pivots, ranks (appended) -----------------------

ORDINAL = {1: "first", 2: "second", 3: "third"}


@repeat(3)
def fi_qoq_largest(s, rng):
    r = _pick(rng, s["Q1"].region)
    per = pd.Series({q: s[q][s[q].region == r].revenue.sum() for q in QUARTERS})
    top = top_labels(per.diff().dropna(), 1)
    return top and text(
        f"For the {r} region, which quarter shows the largest revenue increase over the quarter "
        "before it?",
        top[0],
        "quarter sheet name (the later quarter)",
        "medium",
        region=r,
    )


@repeat(3)
def fi_cumulative_target(s, rng):
    r, f = _pick(rng, s["Q1"].region), int(rng.choice([25, 50, 75]))
    target = s["Targets"].set_index("region").annual_revenue_target[r]
    running = pd.Series({q: s[q][s[q].region == r].revenue.sum() for q in QUARTERS}).cumsum()
    hit = running[running >= target * f / 100]
    if hit.empty:
        return None
    return text(
        f"In which quarter did the {r} region's running total of revenue (cumulative from "
        f"Q1) first reach {f}% of its annual_revenue_target on the Targets sheet?",
        hit.index[0],
        "quarter sheet name",
        "hard",
        region=r,
        percent=f,
    )


@repeat(3)
def fi_pivot_line_region(s, rng):
    p = _pick(rng, s["Q1"].product_line)
    y = _year(s).assign(profit=lambda d: d.revenue - d.cost)
    pivot = y.pivot_table(index="region", columns="product_line", values="profit", aggfunc="sum")
    top = top_labels(pivot[p], 1)
    return top and text(
        "Make a pivot table of annual profit (revenue - cost, all four quarter sheets) "
        "with regions "
        f"as rows and product lines as columns. Which region has the largest value in the {p} "
        "column?",
        top[0],
        "region name",
        "medium",
        product_line=p,
    )


@repeat(3)
def inv_pivot_wh_category(s, rng):
    c = _pick(rng, s["Products"].category)
    df = _stock(s)
    pivot = df.pivot_table(
        index="category", columns="warehouse", values="quantity", aggfunc="sum", fill_value=0
    )
    top = top_labels(pivot.loc[c], 1)
    return top and text(
        f"Make a pivot table of stocked quantity with product categories as rows and warehouses as "
        f"columns. Which warehouse has the largest value in the {c} row?",
        top[0],
        "warehouse name",
        "medium",
        category=c,
    )


@repeat(3)
def inv_rank_in_wh(s, rng):
    w, k = _pick(rng, s["Warehouses"].warehouse), int(rng.integers(1, 4))
    df = _stock(s)
    sub = df[df.warehouse == w]
    label = nth_label((sub.quantity * sub.unit_cost).groupby(sub.sku).sum(), k)
    return label and text(
        f"In warehouse {w}, which SKU ranks {ORDINAL[k]} by stock value (quantity * unit_cost from "
        "the Products sheet)?",
        label,
        "SKU",
        "hard",
        warehouse=w,
        rank=k,
    )


TEMPLATES: dict[str, list[Template]] = {
    "financials": [
        fi_region_quarter_revenue,
        fi_line_profit,
        fi_top_region,
        fi_target_met,
        fi_best_quarter,
        fi_region_margin,
        fi_line_units_rank,
        fi_growth,
        fi_quarter_units,
        fi_qoq_largest,
        fi_cumulative_target,
        fi_pivot_line_region,
    ],
    "inventory": [
        inv_wh_quantity,
        inv_wh_value,
        inv_top_supplier,
        inv_utilization,
        inv_zero_stock,
        inv_city_category,
        inv_category_cost,
        inv_top_skus,
        inv_supplier_skus,
        inv_pivot_wh_category,
        inv_rank_in_wh,
    ],
}
