"""Result-workbook templates over ``sales.csv``: region summaries, monthly orders, a channel pivot.

Each template computes the sheets with pandas from the file as read back from
disk and describes them column by column (see ``workbook_draft``), one template
per level: easy asks for one per-group summary sheet from one table; medium for
a cleaned (filtered, joined, sorted) table plus a summary of it; hard for a
pivot with a total column plus related sheets. ``TEMPLATES`` is their order in
the starter set (``starter.WORKBOOK_SOURCES``): append only, so the ids of
existing tasks stay put.
"""

from __future__ import annotations

from analyst_env.datasets.shipped.draft import pick, repeat
from analyst_env.datasets.shipped.workbook_common import (
    AZ,
    Template,
    pivot_columns,
    pivot_with_total,
)
from analyst_env.datasets.shipped.workbook_draft import Column, Sheet, WorkbookDraft, finish


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
    pivot = pivot_with_total(sub, "region", "channel", value, channels)
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
            pivot_columns(
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


TEMPLATES: list[Template] = [
    wb_sales_region_summary,
    wb_sales_clean_monthly,
    wb_sales_channel_pivot,
]
