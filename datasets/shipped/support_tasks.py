"""Question templates over ``support.sqlite``: NULLs, repeated survey submissions, window functions.

Tickets have NULL ``agent_id`` (unassigned) and NULL ``closed_at`` (still
open); some tickets have two survey rows, and questions say to keep only the
latest. Rank-within-team, gap-to-previous-ticket, month-over-month and
running-count questions are the ones an analyst answers with SQL window
functions. References are computed in pandas from the tables read back.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from analyst_env.datasets.shipped.draft import (
    Draft,
    integer,
    nth_label,
    number,
    pick,
    repeat,
    reuse_last,
    text,
    top_labels,
)

Tables = dict[str, pd.DataFrame]
Template = Callable[[Tables, np.random.Generator], Draft | None]

UTC_TIMES = "Times are UTC text (YYYY-MM-DD HH:MM:SS)."
LATEST = (
    "Some tickets have more than one survey; use only the latest submission (by submitted_at) "
    "for each ticket."
)
ORDINAL = {1: "the most", 2: "the second most", 3: "the third most"}


@reuse_last
def _tickets(t: Tables) -> pd.DataFrame:
    df = t["tickets"].copy()
    df["opened"] = pd.to_datetime(df.opened_at)
    df["closed"] = pd.to_datetime(df.closed_at)
    return df


def _month(rng: np.random.Generator) -> str:
    return f"2024-{int(rng.integers(1, 7)):02d}"


@repeat(3)
def sp_open_count(t, rng):
    p = pick(rng, t["tickets"].priority)
    df = t["tickets"]
    return integer(
        f"How many {p}-priority tickets are still open (closed_at is NULL)?",
        int(((df.priority == p) & df.closed_at.isna()).sum()),
        "easy",
        priority=p,
    )


@repeat(3)
def sp_unassigned(t, rng):
    m = _month(rng)
    df = t["tickets"]
    v = (df.agent_id.isna() & df.opened_at.str.startswith(m)).sum()
    return integer(
        f"How many tickets opened in {m} have no agent assigned (agent_id is NULL)?",
        v,
        "easy",
        month=m,
    )


@repeat(4)
def sp_resolution_hours(t, rng):
    p = pick(rng, t["tickets"].priority)
    df = _tickets(t)
    sub = df[(df.priority == p) & df.closed.notna()]
    v = ((sub.closed - sub.opened).dt.total_seconds() / 3600).mean()
    return number(
        f"What is the average resolution time in hours (closed_at minus opened_at) of closed "
        f"{p}-priority tickets? {UTC_TIMES}",
        v,
        2,
        "medium",
        priority=p,
    )


@repeat(3)
def sp_team_closed(t, rng):
    team, m = pick(rng, t["agents"].team), _month(rng)
    df = t["tickets"].merge(t["agents"], on="agent_id")
    v = ((df.team == team) & df.closed_at.str.startswith(m, na=False)).sum()
    return integer(
        f"How many tickets were closed in {m} by agents of the {team} team?",
        v,
        "medium",
        team=team,
        month=m,
    )


@repeat(4)
def sp_team_csat_latest(t, rng):
    team = pick(rng, t["agents"].team)
    s = (
        t["surveys"]
        .sort_values(["submitted_at", "survey_id"], kind="stable")
        .drop_duplicates("ticket_id", keep="last")
    )
    df = s.merge(t["tickets"], on="ticket_id").merge(t["agents"], on="agent_id")
    return number(
        f"What is the average survey score of tickets handled by agents of the {team} team? "
        f"{LATEST}",
        df[df.team == team].score.mean(),
        3,
        "hard",
        team=team,
    )


def sp_repeat_surveys(t, rng):
    return integer(
        "How many tickets have more than one survey submission?",
        int((t["surveys"].ticket_id.value_counts() > 1).sum()),
        "easy",
    )


@repeat(4)
def sp_agent_rank(t, rng):
    team, k = pick(rng, t["agents"].team), int(rng.integers(1, 4))
    df = t["tickets"][t["tickets"].closed_at.notna()].merge(t["agents"], on="agent_id")
    sub = df[df.team == team]
    name = nth_label(sub.groupby("name").size(), k)
    return name and text(
        f"Within the {team} team, which agent closed {ORDINAL[k]} tickets?",
        name,
        "agent name",
        "hard",
        team=team,
        rank=k,
    )


@repeat(3)
def sp_quick_return(t, rng):
    d = int(rng.choice([2, 3, 7, 14]))
    df = _tickets(t).sort_values(["customer_id", "opened", "ticket_id"], kind="stable")
    gap = df.groupby("customer_id").opened.diff()
    v = (gap <= pd.Timedelta(days=d)).sum()
    return integer(
        f"How many tickets were opened within {d} days ({24 * d} hours, inclusive) after the same "
        f"customer's previous ticket? {UTC_TIMES}",
        v,
        "hard",
        days=d,
    )


@repeat(3)
def sp_month_jump(t, rng):
    p = pick(rng, t["tickets"].priority)
    df = t["tickets"][t["tickets"].priority == p]
    per = df.groupby(df.opened_at.str[:7]).size().sort_index()
    top = top_labels(per.diff().dropna(), 1)
    return top and text(
        f"Which month of 2024 had the largest increase in the number of {p}-priority "
        "tickets opened, compared with the previous month?",
        top[0],
        "month in YYYY-MM form",
        "medium",
        priority=p,
    )


@repeat(3)
def sp_plan_rate(t, rng):
    ch = pick(rng, t["tickets"].channel)
    c = t["customers"]
    n = (
        t["tickets"][t["tickets"].channel == ch]
        .groupby("customer_id")
        .size()
        .reindex(c.customer_id, fill_value=0)
    )
    top = top_labels(n.groupby(c.set_index("customer_id").plan).mean(), 1)
    return top and text(
        f"Which plan has the highest average number of {ch} tickets per customer (customers with "
        "no such tickets count as zero)?",
        top[0],
        "plan name",
        "medium",
        channel=ch,
    )


@repeat(3)
def sp_running_count(t, rng):
    p = pick(rng, t["tickets"].priority)
    df = t["tickets"][t["tickets"].priority == p].sort_values("opened_at", kind="stable")
    target = int(round(len(df) * float(rng.choice([0.25, 0.5, 0.75])), -1))
    if target <= 0:
        return None
    day = df.opened_at.str[:10].iloc[target - 1]
    return text(
        f"Counting {p}-priority tickets in order of opened_at, on which date (UTC) was the "
        f"{target}th one opened? {UTC_TIMES}",
        day,
        "date in YYYY-MM-DD form",
        "hard",
        priority=p,
        count=target,
    )


TEMPLATES: list[Template] = [
    sp_open_count,
    sp_unassigned,
    sp_resolution_hours,
    sp_team_closed,
    sp_team_csat_latest,
    sp_repeat_surveys,
    sp_agent_rank,
    sp_quick_return,
    sp_month_jump,
    sp_plan_rate,
    sp_running_count,
]
