"""Question templates over ``timesheets.xlsx``: double submissions, blank hours, rates and budgets
on other sheets.

Hours has one row per person, week and project, but some rows were
submitted twice (identical copies, to be counted once) and some hours cells
are blank (not submitted, to be left out). Staff and Projects hold the rates,
teams, clients and budgets that questions look up.
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
    pick,
    repeat,
    reuse_last,
    text,
    top_labels,
)

Sheets = dict[str, pd.DataFrame]
Template = Callable[[Sheets, np.random.Generator], Draft | None]

ONCE = (
    "Rows of the Hours sheet that are identical to another row are accidental double "
    "submissions: count them once. Blank hours were not submitted and are left out."
)
ORDINAL = {1: "the most", 2: "the second most", 3: "the third most"}


@reuse_last
def _hours(s: Sheets) -> pd.DataFrame:
    """Deduplicated Hours rows joined to Staff and Projects."""
    h = s["Hours"].drop_duplicates()
    return h.merge(s["Staff"], on="staff_id").merge(s["Projects"], on="project")


@repeat(4)
def ts_project_hours(s, rng):
    p = pick(rng, s["Projects"].project)
    h = _hours(s)
    return number(
        f"How many hours in total were logged on project {p}? {ONCE}",
        h[h.project == p].hours.sum(),
        1,
        "medium",
        project=p,
    )


@repeat(3)
def ts_client_cost(s, rng):
    c = pick(rng, s["Projects"].client)
    h = _hours(s)
    sub = h[h.client == c]
    return number(
        f"What is the total labour cost of client {c}'s projects, where cost is hours times "
        f"the person's hourly_rate (Staff sheet) and clients are on the Projects sheet? {ONCE}",
        (sub.hours * sub.hourly_rate).sum(),
        2,
        "hard",
        client=c,
    )


def ts_over_budget(s, rng):
    h = _hours(s)
    used = h.groupby("project").hours.sum()
    budget = s["Projects"].set_index("project").budget_hours
    over = sorted(p for p in budget.index if used.get(p, 0.0) > budget[p])
    if not over or len(over) == len(budget):
        return None
    return members(
        f"Which projects logged more hours than their budget_hours on the Projects sheet? {ONCE}",
        over,
        "project codes",
        "hard",
    )


@repeat(4)
def ts_team_rank(s, rng):
    team, k = pick(rng, s["Staff"].team), int(rng.integers(1, 4))
    h = _hours(s)
    name = nth_label(h[h.team == team].groupby("name").hours.sum(), k)
    return name and text(
        f"Within the {team} team, who logged {ORDINAL[k]} hours in total? {ONCE}",
        name,
        "person's name",
        "hard",
        team=team,
        rank=k,
    )


@repeat(3)
def ts_week_jump(s, rng):
    team = pick(rng, s["Staff"].team)
    h = _hours(s)
    sub = h[h.team == team]
    per = (
        sub.groupby(pd.to_datetime(sub.week_start).dt.strftime("%Y-%m-%d")).hours.sum().sort_index()
    )
    top = top_labels(per.diff().dropna(), 1)
    return top and text(
        f"For the {team} team, which week (week_start) had the largest increase in total hours "
        f"compared with the previous week? {ONCE}",
        top[0],
        "week_start date in YYYY-MM-DD form",
        "medium",
        team=team,
    )


@repeat(3)
def ts_blank_rows(s, rng):
    team = pick(rng, s["Staff"].team)
    h = s["Hours"].drop_duplicates().merge(s["Staff"], on="staff_id")
    return integer(
        f"How many Hours rows of {team} team members have a blank hours cell? Count identical rows "
        "once.",
        int((h.team == team).sum() - h[h.team == team].hours.count()),
        "easy",
        team=team,
    )


def ts_duplicate_rows(s, rng):
    return integer(
        "How many rows of the Hours sheet are exact copies of an earlier row?",
        int(s["Hours"].duplicated().sum()),
        "easy",
    )


@repeat(3)
def ts_pivot_team_project(s, rng):
    team = pick(rng, s["Staff"].team)
    h = _hours(s)
    pivot = h.pivot_table(
        index="team", columns="project", values="hours", aggfunc="sum", fill_value=0
    )
    top = top_labels(pivot.loc[team], 1)
    return top and text(
        "Build a pivot table of hours with teams as rows and projects as columns. Which "
        f"project has the largest value in the {team} row? {ONCE}",
        top[0],
        "project code",
        "medium",
        team=team,
    )


@repeat(3)
def ts_mean_weekly(s, rng):
    sid = pick(rng, s["Staff"].staff_id)
    h = _hours(s)
    sub = h[h.staff_id == sid]
    name = s["Staff"].set_index("staff_id").name[sid]
    per_week = sub.groupby("week_start").hours.sum()
    return number(
        f"On average, how many hours per week did {name} log, over the weeks in which they "
        f"logged any hours? {ONCE}",
        per_week[per_week > 0].mean(),
        2,
        "medium",
        person=name,
    )


TEMPLATES: list[Template] = [
    ts_project_hours,
    ts_client_cost,
    ts_over_budget,
    ts_team_rank,
    ts_week_jump,
    ts_blank_rows,
    ts_duplicate_rows,
    ts_pivot_team_project,
    ts_mean_weekly,
]
