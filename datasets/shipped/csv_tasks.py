"""Question templates over the starter set's CSV files.

Each template takes the table as read back from disk and a seeded generator
for its parameters, computes the gold answer with pandas, and returns a
``Draft`` (or ``None`` when the drawn parameters give an ambiguous answer,
e.g. a tie for first place).
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
    parts,
    ranking,
    repeat,
    text,
    top_labels,
)
from analyst_env.datasets.shipped.draft import pick as _pick

Template = Callable[[pd.DataFrame, np.random.Generator], Draft | None]


# --- sales.csv ---------------------------------------------------------------


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


# --- employees.csv -------------------------------------------------------------


def emp_dept_mean_salary(df, rng):
    d = _pick(rng, df.department)
    return number(
        f"What is the average salary in the {d} department?",
        df[df.department == d].salary.mean(),
        2,
        "easy",
        department=d,
    )


def emp_top_median_dept(df, rng):
    top = top_labels(df.groupby("department").salary.median(), 1)
    return top and text(
        "Which department has the highest median salary?", top[0], "department name", "medium"
    )


def emp_remote_hires(df, rng):
    y1 = int(rng.integers(2010, 2020))
    y2 = y1 + int(rng.integers(2, 5))
    yr = df.hire_date.str[:4].astype(int)
    v = ((yr >= y1) & (yr <= y2) & (df.remote == "Yes")).sum()
    return integer(
        f"How many remote employees were hired between {y1} and {y2}, inclusive?",
        v,
        "easy",
        start_year=y1,
        end_year=y2,
    )


def emp_top_cities(df, rng):
    top = top_labels(df.city.value_counts(), 3)
    return top and members("Which 3 cities have the most employees?", top, "city names", "medium")


def emp_level_score(df, rng):
    lv = _pick(rng, df.job_level)
    v = df[df.job_level == lv].performance_score.mean()
    return number(
        f"What is the mean performance_score of {lv} employees, ignoring missing scores?",
        v,
        2,
        "medium",
        job_level=lv,
    )


def emp_missing_scores(df, rng):
    return integer(
        "How many employees have no performance_score recorded?",
        df.performance_score.isna().sum(),
        "easy",
    )


def emp_age_salary_corr(df, rng):
    return number(
        "What is the Pearson correlation between age and salary across all employees?",
        df.age.corr(df.salary),
        3,
        "hard",
    )


def emp_above_median_share(df, rng):
    d = _pick(rng, df.department)
    med = df.salary.median()
    v = 100 * (df[df.department == d].salary > med).mean()
    return number(
        f"What percentage of {d} employees earn strictly more than the company-wide median salary "
        "(a percentage between 0 and 100)?",
        v,
        1,
        "hard",
        department=d,
    )


def emp_level_rank(df, rng):
    top = top_labels(df.groupby("job_level").salary.mean(), df.job_level.nunique())
    return top and ranking(
        "Order the job levels by average salary.",
        top,
        "job level names",
        "highest average salary first",
        "medium",
    )


# --- flights.csv -----------------------------------------------------------------


def fl_carrier_dep_delay(df, rng):
    c = _pick(rng, df.carrier)
    v = df[(df.carrier == c) & (df.cancelled == 0)].dep_delay_min.mean()
    return number(
        f"What is the average departure delay in minutes of non-cancelled {c} flights?",
        v,
        2,
        "easy",
        carrier=c,
    )


def fl_cancel_rate(df, rng):
    o = _pick(rng, df.origin)
    v = 100 * df[df.origin == o].cancelled.mean()
    return number(
        f"What percentage of flights departing from {o} were cancelled (a percentage "
        "between 0 and 100)?",
        v,
        2,
        "medium",
        origin=o,
    )


def fl_most_late_carrier(df, rng):
    top = top_labels(df[df.arr_delay_min > 15].carrier.value_counts(), 1)
    return top and text(
        "Which carrier has the most flights that arrived more than 15 minutes late?",
        top[0],
        "carrier code",
        "medium",
    )


def fl_top_routes(df, rng):
    top = top_labels((df.origin + "-" + df.dest).value_counts(), 3)
    return top and ranking(
        "What are the 3 busiest routes by number of flights? Write each route as ORIGIN-DEST "
        "(for example ATL-BOS).",
        top,
        "routes",
        "busiest first",
        "hard",
    )


def fl_month_origin_count(df, rng):
    o, m = _pick(rng, df.origin), int(rng.integers(1, 13))
    name = pd.Timestamp(2023, m, 1).strftime("%B")
    v = ((df.origin == o) & (df.flight_date.str[5:7] == f"{m:02d}")).sum()
    return integer(
        f"How many flights were scheduled to depart from {o} in {name} 2023?",
        v,
        "easy",
        origin=o,
        month=m,
    )


def fl_p90_arr_delay(df, rng):
    c = _pick(rng, df.carrier)
    v = df[df.carrier == c].arr_delay_min.dropna().quantile(0.9)
    return number(
        f"What is the 90th percentile of arrival delay (minutes) for {c} flights, ignoring "
        "cancelled flights and using linear interpolation?",
        v,
        1,
        "hard",
        carrier=c,
    )


def fl_evening_distance(df, rng):
    h = int(rng.integers(17, 21))
    v = df[df.sched_dep_hour >= h].distance_mi.mean()
    return number(
        f"What is the average distance in miles of flights scheduled to depart at hour {h} "
        "or later?",
        v,
        2,
        "easy",
        hour=h,
    )


def fl_carrier_summary(df, rng):
    c = _pick(rng, df.carrier)
    sub = df[df.carrier == c]
    return parts(
        f"For carrier {c}, report the number of cancelled flights and the mean arrival "
        "delay in minutes of the flights that were not cancelled.",
        [
            ("cancelled_flights", sub.cancelled.sum(), 0),
            ("mean_arr_delay", sub.arr_delay_min.mean(), 2),
        ],
        "medium",
        carrier=c,
    )


# --- sensors.csv --------------------------------------------------------------------


def sen_site_day_mean(df, rng):
    s, day = _pick(rng, df.site), _pick(rng, df.timestamp.str[:10])
    v = df[(df.site == s) & (df.timestamp.str[:10] == day)].temperature_c.mean()
    return number(
        f"What was the mean temperature_c at the {s} site on {day}?", v, 2, "easy", site=s, date=day
    )


def sen_site_max_humidity(df, rng):
    s = _pick(rng, df.site)
    return number(
        f"What is the highest humidity_pct recorded at the {s} site?",
        df[df.site == s].humidity_pct.max(),
        1,
        "easy",
        site=s,
    )


def sen_missing_temps(df, rng):
    return integer(
        "How many readings have a missing temperature_c value?",
        df.temperature_c.isna().sum(),
        "easy",
    )


def sen_hottest_day(df, rng):
    top = top_labels(df.groupby(df.timestamp.str[:10]).temperature_c.mean(), 1)
    return top and text(
        "On which date was the average temperature_c over all sites and hours the highest?",
        top[0],
        "date in YYYY-MM-DD form",
        "medium",
    )


def sen_pressure_std(df, rng):
    s = _pick(rng, df.site)
    return number(
        f"What is the sample standard deviation of pressure_hpa at the {s} site?",
        df[df.site == s].pressure_hpa.std(),
        2,
        "medium",
        site=s,
    )


def sen_temp_humidity_corr(df, rng):
    s = _pick(rng, df.site)
    sub = df[df.site == s]
    return number(
        f"What is the Pearson correlation between temperature_c and humidity_pct at the {s} site "
        "(rows with a missing value excluded)?",
        sub.temperature_c.corr(sub.humidity_pct),
        3,
        "hard",
        site=s,
    )


def sen_site_rank(df, rng):
    top = top_labels(df.groupby("site").temperature_c.mean(), df.site.nunique())
    return top and ranking(
        "Order the sites by mean temperature_c.", top, "site names", "warmest first", "medium"
    )


# --- window functions, ranks within groups and pivots (appended: earlier ids stay stable) ---------

ORDINAL = {1: "first", 2: "second", 3: "third"}
HIGHEST = {1: "highest", 2: "second-highest", 3: "third-highest"}


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


@repeat(3)
def emp_nth_in_dept(df, rng):
    d, k = _pick(rng, df.department), int(rng.integers(1, 4))
    label = nth_label(df[df.department == d].set_index("name").salary, k)
    return label and text(
        f"Who has the {HIGHEST[k]} salary in the {d} department?",
        label,
        "employee name",
        "medium",
        department=d,
        rank=k,
    )


@repeat(3)
def emp_above_dept_avg(df, rng):
    c = _pick(rng, df.city)
    dept_avg = df.groupby("department").salary.transform("mean")
    v = ((df.city == c) & (df.salary > dept_avg)).sum()
    return integer(
        f"How many employees based in {c} earn strictly more than the average salary of their own "
        "department (the department average over all cities)?",
        v,
        "medium",
        city=c,
    )


@repeat(3)
def fl_carrier_rank_at_origin(df, rng):
    o, k = _pick(rng, df.origin), int(rng.integers(1, 4))
    label = nth_label(df[df.origin == o].carrier.value_counts(), k)
    return label and text(
        f"Among flights departing from {o}, which carrier ranks {ORDINAL[k]} by number of flights?",
        label,
        "carrier code",
        "medium",
        origin=o,
        rank=k,
    )


@repeat(3)
def sen_max_hourly_rise(df, rng):
    s = _pick(rng, df.site)
    sub = df[df.site == s].sort_values("timestamp")
    v = sub.temperature_c.diff().max()  # diff is NaN next to a missing reading, and max skips NaN
    return number(
        f"At the {s} site, what is the largest rise in temperature_c from one hourly "
        "reading to the next (skip pairs where either reading is missing)?",
        v,
        2,
        "hard",
        site=s,
    )


@repeat(3)
def sen_rolling_max(df, rng):
    s, w = _pick(rng, df.site), int(rng.choice([6, 12, 24]))
    sub = df[df.site == s].sort_values("timestamp")
    v = sub.temperature_c.rolling(w).mean().max()
    return number(
        f"At the {s} site, what is the highest {w}-hour rolling mean of temperature_c "
        f"(windows of {w} "
        f"consecutive hourly readings; only windows with all {w} readings present count)?",
        v,
        2,
        "hard",
        site=s,
        window=w,
    )


TEMPLATES: dict[str, list[Template]] = {
    "sales": [
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
    ],
    "employees": [
        emp_dept_mean_salary,
        emp_top_median_dept,
        emp_remote_hires,
        emp_top_cities,
        emp_level_score,
        emp_missing_scores,
        emp_age_salary_corr,
        emp_above_median_share,
        emp_level_rank,
        emp_nth_in_dept,
        emp_above_dept_avg,
    ],
    "flights": [
        fl_carrier_dep_delay,
        fl_cancel_rate,
        fl_most_late_carrier,
        fl_top_routes,
        fl_month_origin_count,
        fl_p90_arr_delay,
        fl_evening_distance,
        fl_carrier_summary,
        fl_carrier_rank_at_origin,
    ],
    "sensors": [
        sen_site_day_mean,
        sen_site_max_humidity,
        sen_missing_temps,
        sen_hottest_day,
        sen_pressure_std,
        sen_temp_humidity_corr,
        sen_site_rank,
        sen_max_hourly_rise,
        sen_rolling_max,
    ],
}
