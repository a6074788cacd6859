"""Question templates over ``university.sqlite``: departments, courses, students and enrollments.

Distinct students per department and term, grade averages, medians and fail
rates, credit-weighted top students and majors; appended later, students who
improved between terms and ranks within a course. The database comes from
``sqlite_tables.make_university_db``.

Templates receive every table of the database (read back from the file) as
pandas frames and compute answers with joins in pandas, so the reference does
not share code or SQL with what an agent would write. ``TEMPLATES`` is their
order in the starter set (``starter.SOURCES``): append only, so the ids of
existing tasks stay put.
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
    reuse_last,
    text,
    top_labels,
)
from analyst_env.datasets.shipped.draft import pick as _pick

Tables = dict[str, pd.DataFrame]
Template = Callable[[Tables, np.random.Generator], Draft | None]


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


# --- window functions: gaps to the previous row, first rows, ranks within groups (appended) ---


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


TEMPLATES: list[Template] = [
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
]
