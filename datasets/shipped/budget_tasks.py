"""Question templates over ``budget.xlsx``: lookups across sheets, mixed cell types, a wide budget
sheet.

The Expenses sheet refers to departments by code (names and managers are on
Departments), is in four currencies (rates on FX), stores some amounts as
text with thousands separators and some dates as ``DD.MM.YYYY`` text next to
real date cells, and leaves some category and approval cells blank. Budget
has one column per month, so comparisons need an unpivot or pivot.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from analyst_env.datasets.shipped.cleaning import parse_dates, parse_money
from analyst_env.datasets.shipped.draft import (
    Draft,
    integer,
    members,
    number,
    pick,
    ranking,
    repeat,
    reuse_last,
    text,
    top_labels,
)
from analyst_env.datasets.shipped.messy_tables import EXPENSE_TEXT_DATE, MONTHS

Sheets = dict[str, pd.DataFrame]
Template = Callable[[Sheets, np.random.Generator], Draft | None]

USD = (
    "Amounts are in each row's currency; convert to USD with the FX sheet (usd_per_unit). "
    "Some amount cells are text with comma thousands separators."
)
DATES = "The date column holds real date cells and text dates written DD.MM.YYYY."
QUARTER_MONTHS = {"Q1": MONTHS[0:3], "Q2": MONTHS[3:6], "Q3": MONTHS[6:9], "Q4": MONTHS[9:12]}


@reuse_last
def _spend(s: Sheets) -> pd.DataFrame:
    """Expenses with department names, ``usd`` amounts and parsed ``day`` dates."""
    e = (
        s["Expenses"]
        .merge(s["Departments"], on="dept_code", how="left")
        .merge(s["FX"], on="currency", how="left")
    )
    e["usd"] = parse_money(e.amount) * e.usd_per_unit
    e["day"] = parse_dates(e.date, [EXPENSE_TEXT_DATE, "%Y-%m-%d %H:%M:%S", "%Y-%m-%d"])
    return e


@reuse_last
def _budget_long(s: Sheets) -> pd.DataFrame:
    b = s["Budget"].melt(id_vars="dept_code", var_name="month", value_name="budget")
    return b.merge(s["Departments"], on="dept_code")


@repeat(4)
def bu_dept_spend(s, rng):
    d = pick(rng, s["Departments"].department)
    e = _spend(s)
    return number(
        f"What is the total spend in USD of the {d} department (department names are on the "
        f"Departments sheet)? {USD}",
        e[e.department == d].usd.sum(),
        2,
        "medium",
        department=d,
    )


@repeat(4)
def bu_month_spend(s, rng):
    m = int(rng.integers(1, 13))
    name = pd.Timestamp(2024, m, 1).strftime("%B")
    e = _spend(s)
    return number(
        f"What was the total spend in USD of expenses dated in {name} 2024? {DATES} {USD}",
        e[e.day.dt.month == m].usd.sum(),
        2,
        "hard",
        month=m,
    )


@repeat(3)
def bu_over_budget(s, rng):
    q = str(rng.choice(list(QUARTER_MONTHS)))
    e = _spend(s)
    months = [MONTHS.index(m) + 1 for m in QUARTER_MONTHS[q]]
    actual = e[e.day.dt.month.isin(months)].groupby("department").usd.sum()
    b = _budget_long(s)
    budget = b[b.month.isin(QUARTER_MONTHS[q])].groupby("department").budget.sum()
    over = sorted(d for d in budget.index if actual.get(d, 0.0) > budget[d])
    if not over or len(over) == len(budget):
        return None
    months_text = ", ".join(QUARTER_MONTHS[q])
    return members(
        f"Which departments spent more in USD during {q} 2024 ({months_text}) than the sum "
        f"of their Budget sheet columns for those months? {DATES} {USD}",
        over,
        "department names",
        "hard",
        quarter=q,
    )


@repeat(4)
def bu_month_variance(s, rng):
    d, m = pick(rng, s["Departments"].department), int(rng.integers(1, 13))
    e = _spend(s)
    actual = e[(e.department == d) & (e.day.dt.month == m)].usd.sum()
    b = _budget_long(s)
    budget = b[(b.department == d) & (b.month == MONTHS[m - 1])].budget.sum()
    name = pd.Timestamp(2024, m, 1).strftime("%B")
    return number(
        f"For the {d} department in {name} 2024, what is actual USD spend minus the Budget "
        f"sheet amount (negative if under budget)? {DATES} {USD}",
        actual - budget,
        2,
        "hard",
        department=d,
        month=m,
    )


def bu_missing_category(s, rng):
    return integer(
        "How many rows of the Expenses sheet have a blank category?",
        int(s["Expenses"].category.isna().sum()),
        "easy",
    )


@repeat(3)
def bu_category_rank(s, rng):
    d = pick(rng, s["Departments"].department)
    e = _spend(s)
    sub = e[(e.department == d) & e.category.notna()]
    top = top_labels(sub.groupby("category").usd.sum(), sub.category.nunique())
    return top and ranking(
        f"Rank the expense categories of the {d} department by total USD spend (rows with a "
        f"blank category left out). {USD}",
        top,
        "category names",
        "highest spend first",
        "medium",
        department=d,
    )


@repeat(3)
def bu_manager_count(s, rng):
    m = pick(rng, s["Departments"].manager)
    e = _spend(s)
    return integer(
        f"How many expense rows belong to departments managed by {m} (managers are on the "
        "Departments sheet)?",
        int((e.manager == m).sum()),
        "easy",
        manager=m,
    )


@repeat(4)
def bu_pivot_top_department(s, rng):
    c = pick(rng, s["Expenses"].category)
    e = _spend(s)
    pivot = e.pivot_table(
        index="department", columns="category", values="usd", aggfunc="sum", fill_value=0
    )
    top = top_labels(pivot[c], 1)
    return top and text(
        f"Build a pivot table of USD spend with departments as rows and categories as columns. "
        f"Which department has the largest value in the {c} column? {USD}",
        top[0],
        "department name",
        "medium",
        category=c,
    )


@repeat(3)
def bu_unapproved_share(s, rng):
    c = pick(rng, s["Expenses"].currency)
    e = s["Expenses"][s["Expenses"].currency == c]
    return number(
        f"What percentage of the expense rows in {c} have a blank approved cell (a "
        "percentage between 0 and 100)?",
        100 * e.approved.isna().mean(),
        2,
        "medium",
        currency=c,
    )


def bu_peak_budget_month(s, rng):
    b = _budget_long(s)
    top = top_labels(b.groupby("month").budget.sum(), 1)
    return top and text(
        "Summed over all departments, which month column of the Budget sheet has the "
        "largest total?",
        top[0],
        "month column name (e.g. Jan)",
        "easy",
    )


TEMPLATES: list[Template] = [
    bu_dept_spend,
    bu_month_spend,
    bu_over_budget,
    bu_month_variance,
    bu_missing_category,
    bu_category_rank,
    bu_manager_count,
    bu_pivot_top_department,
    bu_unapproved_share,
    bu_peak_budget_month,
]
