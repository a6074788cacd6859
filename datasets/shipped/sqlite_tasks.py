"""Question templates over the starter set's SQLite databases.

Templates receive every table of the database (read back from the file) as
pandas frames and compute answers with joins in pandas, so the reference does
not share code or SQL with what an agent would write.
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


# --- retail.sqlite -------------------------------------------------------------


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


# --- university.sqlite -------------------------------------------------------------


@reuse_last
def _enr(t: Tables) -> pd.DataFrame:
    return (
        t["enrollments"]
        .merge(t["courses"], on="course_id")
        .merge(t["departments"], on="dept_id")
        .merge(t["students"], on="student_id")
    )


def un_dept_term_students(t, rng):
    d, term = _pick(rng, t["departments"].dept_name), _pick(rng, t["enrollments"].term)
    df = _enr(t)
    v = df[(df.dept_name == d) & (df.term == term)].student_id.nunique()
    return integer(
        f"How many distinct students took at least one {d} course in term {term}?",
        v,
        "medium",
        department=d,
        term=term,
    )


def un_course_mean_grade(t, rng):
    c = _pick(rng, t["courses"].title)
    df = _enr(t)
    return number(
        f"What is the average grade across all enrollments in the course '{c}'?",
        df[df.title == c].grade.mean(),
        2,
        "easy",
        course=c,
    )


def un_best_dept(t, rng):
    top = top_labels(_enr(t).groupby("dept_name").grade.mean(), 1)
    return top and text(
        "Which department's courses have the highest average grade over all enrollments?",
        top[0],
        "department name",
        "medium",
    )


def un_top_students(t, rng):
    df = _enr(t).assign(points=lambda d: d.grade * d.credits)
    g = df.groupby("name")[["points", "credits"]].sum()
    gpa = g.points / g.credits
    top = top_labels(gpa, 3)
    return top and members(
        "Which 3 students have the highest credit-weighted average grade (sum of grade * credits "
        "divided by sum of credits, over all their enrollments)?",
        top,
        "student names",
        "hard",
    )


def un_major_count(t, rng):
    d = _pick(rng, t["departments"].dept_name)
    df = t["students"].merge(t["departments"], left_on="major_dept_id", right_on="dept_id")
    return integer(
        f"How many students major in {d}?", (df.dept_name == d).sum(), "easy", department=d
    )


def un_student_credits(t, rng):
    s = _pick(rng, t["students"].name)
    df = _enr(t)
    return integer(
        f"How many credits in total did {s} enroll in, across all terms?",
        df[df.name == s].credits.sum(),
        "medium",
        student=s,
    )


def un_popular_course(t, rng):
    term = _pick(rng, t["enrollments"].term)
    df = _enr(t)
    top = top_labels(df[df.term == term].title.value_counts(), 1)
    return top and text(
        f"Which course had the most enrollments in term {term}?",
        top[0],
        "course title",
        "easy",
        term=term,
    )


def un_fail_rate(t, rng):
    term = _pick(rng, t["enrollments"].term)
    e = t["enrollments"][t["enrollments"].term == term]
    return number(
        f"What percentage of enrollments in term {term} have a grade below 60 (a percentage "
        "between 0 and 100)?",
        100 * (e.grade < 60).mean(),
        2,
        "medium",
        term=term,
    )


def un_dept_median(t, rng):
    d = _pick(rng, t["departments"].dept_name)
    df = _enr(t)
    return number(
        f"What is the median grade over all enrollments in {d} courses?",
        df[df.dept_name == d].grade.median(),
        1,
        "medium",
        department=d,
    )


def un_building_rank(t, rng):
    df = _enr(t)
    top = top_labels(df.groupby("dept_name").student_id.nunique(), df.dept_name.nunique())
    return top and ranking(
        "Rank the departments by the number of distinct students enrolled in their courses.",
        top,
        "department names",
        "most students first",
        "hard",
    )


# --- window functions: gaps to the previous row, first rows, ranks within groups (appended) ------

ORDINAL = {1: "first", 2: "second", 3: "third"}
HIGHEST = {1: "highest", 2: "second-highest", 3: "third-highest"}


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


@repeat(3)
def un_improved_students(t, rng):
    d = _pick(rng, t["departments"].dept_name)
    df = _enr(t)
    majors = t["students"].merge(t["departments"], left_on="major_dept_id", right_on="dept_id")
    ids = majors[majors.dept_name == d].student_id
    per = df[df.student_id.isin(ids)].pivot_table(
        index="student_id", columns="term", values="grade", aggfunc="mean"
    )
    both = per.dropna()
    v = (both["2024-Spring"] > both["2023-Fall"]).sum()
    return integer(
        f"Among students majoring in {d} who have enrollments in both 2023-Fall and "
        "2024-Spring, how many have a higher average grade in 2024-Spring than in 2023-Fall?",
        v,
        "hard",
        department=d,
    )


@repeat(3)
def un_course_rank(t, rng):
    term, k = _pick(rng, t["enrollments"].term), int(rng.integers(1, 4))
    df = _enr(t)
    df = df[df.term == term]
    c = _pick(rng, df.title)
    label = nth_label(df[df.title == c].set_index("name").grade, k)
    return label and text(
        f"In term {term}, which student had the {HIGHEST[k]} grade in the course '{c}'?",
        label,
        "student name",
        "medium",
        term=term,
        course=c,
        rank=k,
    )


TEMPLATES: dict[str, list[Template]] = {
    "retail": [
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
    ],
    "university": [
        un_dept_term_students,
        un_course_mean_grade,
        un_best_dept,
        un_top_students,
        un_major_count,
        un_student_credits,
        un_popular_course,
        un_fail_rate,
        un_dept_median,
        un_building_rank,
        un_improved_students,
        un_course_rank,
    ],
}
