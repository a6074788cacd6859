"""Question templates over ``employees.csv``: an HR roster with salaries, levels and review scores.

Department and level averages, hires in a year range, missing scores,
correlations and ranks; appended later, ranks within a department and
comparisons with a department's own average. The table comes from
``csv_tables.make_employees``.

Each template takes the table as read back from disk and a seeded generator
for its parameters, computes the gold answer with pandas, and returns a
``Draft`` (or ``None`` when the drawn parameters give an ambiguous answer,
e.g. a tie for first place). ``TEMPLATES`` is their order in the starter set
(``starter.SOURCES``): append only, so the ids of existing tasks stay put.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from analyst_env.datasets.shipped.draft import (
    HIGHEST,
    Draft,
    integer,
    members,
    nth_label,
    number,
    ranking,
    repeat,
    text,
    top_labels,
)
from analyst_env.datasets.shipped.draft import pick as _pick

Template = Callable[[pd.DataFrame, np.random.Generator], Draft | None]


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


# --- window functions, ranks within groups and pivots (appended: earlier ids stay stable) ---


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


TEMPLATES: list[Template] = [
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
]
