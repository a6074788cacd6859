"""Result-workbook templates over ``financials.xlsx``: quarter sheets Q1-Q4 and the Targets sheet.

A quarter's regions, a region's product lines and quarters, and a
region-by-quarter pivot checked against the annual targets: most sheets
combine all four quarter sheets.

Each template computes the sheets with pandas from the file as read back from
disk and describes them column by column (see ``workbook_draft``), one template
per level: easy asks for one per-group summary sheet from one table; medium for
a cleaned (filtered, joined, sorted) table plus a summary of it; hard for a
pivot with a total column plus related sheets. ``TEMPLATES`` is their order in
the starter set (``starter.WORKBOOK_SOURCES``): append only, so the ids of
existing tasks stay put.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analyst_env.datasets.shipped.draft import pick, repeat, reuse_last
from analyst_env.datasets.shipped.workbook_common import (
    AZ,
    Template,
    pivot_columns,
    pivot_with_total,
)
from analyst_env.datasets.shipped.workbook_draft import Column, Sheet, WorkbookDraft, finish

QUARTERS = ["Q1", "Q2", "Q3", "Q4"]


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
    pivot = pivot_with_total(y, "region", "quarter", value, QUARTERS)
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
            pivot_columns(
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


TEMPLATES: list[Template] = [
    wb_fin_quarter_regions,
    wb_fin_region_lines,
    wb_fin_pivot_targets,
]
