"""Starter tables with the defects real analyst inputs have, drawn from a seeded generator.

``tables`` makes tidy data; the makers here add what analysts spend their time
on: numbers stored as text with currency symbols and thousands separators,
one date column in several formats, accidental duplicate rows, blank and
``N/A`` cells, NULLs, timestamps kept in UTC while questions are asked in a
local time zone, wide month-per-column sheets and lookups across sheets.
Each defect is regular enough that a question can state how to handle it,
and ``cleaning`` holds the reference parsers. All randomness comes from the
``numpy.random.Generator`` passed in.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd

from analyst_env.datasets.shipped.tables import CATEGORIES, CITIES, mix_weights, person_names

STORES = ["Airport", "Downtown", "Harbor", "Mall", "Uptown"]
TXN_DATE_FORMATS = ["%Y-%m-%d", "%m/%d/%Y", "%d %b %Y"]
ZONES = [
    "America/New_York",
    "America/Los_Angeles",
    "Europe/Berlin",
    "Asia/Tokyo",
    "Australia/Sydney",
]
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
EXPENSE_TEXT_DATE = "%d.%m.%Y"


def _with_duplicates(rng: np.random.Generator, df: pd.DataFrame, share: float) -> pd.DataFrame:
    """``df`` plus verbatim copies of about ``share`` of its rows, each placed right after a random
    row."""
    copies = df.iloc[np.sort(rng.choice(len(df), int(len(df) * share), replace=False))]
    order = np.concatenate([np.arange(len(df), dtype=float), rng.uniform(0, len(df), len(copies))])
    both = pd.concat([df, copies], ignore_index=True)
    return both.iloc[np.argsort(order, kind="stable")].reset_index(drop=True)


def make_transactions(rng: np.random.Generator, n: int = 1500) -> pd.DataFrame:
    """Point-of-sale exports from five stores in 2023: text amounts, mixed date formats, repeated
    rows."""
    cats = list(CATEGORIES)
    category = rng.choice(cats, n, p=mix_weights(rng, len(cats)))
    lo = np.array([CATEGORIES[c][0] for c in category])
    hi = np.array([CATEGORIES[c][1] for c in category])
    quantity = rng.integers(1, 6, n)
    amount = np.round(rng.uniform(lo, hi) * quantity, 2)
    days = np.sort(rng.integers(0, 365, n))
    dates = pd.Timestamp("2023-01-01") + pd.to_timedelta(days, unit="D")
    fmt = rng.choice(len(TXN_DATE_FORMATS), n, p=[0.5, 0.3, 0.2])
    style = rng.choice(3, n, p=[0.4, 0.4, 0.2])
    texts = []
    for a, s in zip(amount, style):
        texts.append(f"${a:,.2f}" if s == 0 else f"{a:.2f}" if s == 1 else f"{a:,.2f}")
    missing = rng.random(n)
    texts = ["" if m < 0.04 else "N/A" if m < 0.06 else t for m, t in zip(missing, texts)]
    qty = pd.array(quantity, dtype="Int64")
    qty[rng.random(n) < 0.03] = pd.NA
    payment = rng.choice(["card", "cash", "mobile"], n, p=[0.55, 0.25, 0.2]).astype(object)
    payment[rng.random(n) < 0.05] = ""
    df = pd.DataFrame(
        {
            "txn_id": [f"T{i:05d}" for i in range(1, n + 1)],
            "txn_date": [d.strftime(TXN_DATE_FORMATS[f]) for d, f in zip(dates, fmt)],
            "store": rng.choice(STORES, n, p=mix_weights(rng, len(STORES))),
            "category": category,
            "quantity": qty,
            "amount": texts,
            "payment_method": payment,
        }
    )
    return _with_duplicates(rng, df, 0.06)


def make_events(rng: np.random.Generator, n: int = 2500) -> pd.DataFrame:
    """App events of 200 users, 2024-03-01 to 2024-04-14, timestamped in UTC (across DST
    changes)."""
    users = [f"U{i:03d}" for i in range(1, 201)]
    start = pd.Timestamp("2024-03-01")
    seconds = np.sort(rng.integers(0, 45 * 86400, n))
    ts = start + pd.to_timedelta(seconds, unit="s")
    kind = rng.choice(["view", "add_to_cart", "purchase"], n, p=[0.68, 0.2, 0.12])
    amount = np.where(kind == "purchase", np.round(rng.gamma(2.0, 30.0, n) + 5, 2), np.nan)
    return pd.DataFrame(
        {
            "event_id": [f"E{i:05d}" for i in range(1, n + 1)],
            "user_id": rng.choice(users, n, p=mix_weights(rng, len(users))),
            "ts_utc": ts.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "event_type": kind,
            "device": rng.choice(["web", "ios", "android"], n, p=[0.45, 0.3, 0.25]),
            "amount_usd": amount,
        }
    )


def make_support_db(rng: np.random.Generator) -> dict[str, pd.DataFrame]:
    """A help desk: agents, customers, tickets (UTC times, NULL agent / closed_at) and repeated
    surveys."""
    teams = ["Billing", "Enterprise", "Onboarding", "Technical"]
    n_agents, n_cust, n_tix = 24, 400, 2000
    agents = pd.DataFrame(
        {
            "agent_id": np.arange(1, n_agents + 1),
            "name": person_names(rng, n_agents),
            "team": rng.choice(teams, n_agents),
            "hired_on": pd.Series(
                pd.Timestamp("2018-01-01")
                + pd.to_timedelta(rng.integers(0, 6 * 365, n_agents), unit="D")
            ).dt.strftime("%Y-%m-%d"),
        }
    )
    customers = pd.DataFrame(
        {
            "customer_id": np.arange(1, n_cust + 1),
            "name": person_names(rng, n_cust),
            "plan": rng.choice(["Free", "Pro", "Business"], n_cust, p=[0.5, 0.32, 0.18]),
            "city": rng.choice(CITIES, n_cust),
        }
    )
    weight = customers.plan.map(
        {"Free": 1.0, "Pro": 1.6, "Business": 2.4}
    ).to_numpy() * rng.uniform(0.3, 1.7, n_cust)
    opened = pd.Timestamp("2024-01-01") + pd.to_timedelta(
        np.sort(rng.integers(0, 182 * 86400, n_tix)), unit="s"
    )
    priority = rng.choice(["low", "normal", "high", "urgent"], n_tix, p=[0.3, 0.45, 0.18, 0.07])
    speed = (
        pd.Series(priority)
        .map({"low": 30.0, "normal": 20.0, "high": 8.0, "urgent": 3.0})
        .to_numpy()
    )
    hours = np.round(rng.lognormal(0, 0.8, n_tix) * speed * 3600)
    closed = opened + pd.to_timedelta(hours, unit="s")
    agent = pd.array(rng.integers(1, n_agents + 1, n_tix), dtype="Int64")
    unassigned = rng.random(n_tix) < 0.08
    agent[unassigned] = pd.NA
    still_open = (rng.random(n_tix) < 0.07) | unassigned | (closed > pd.Timestamp("2024-07-01"))
    tickets = pd.DataFrame(
        {
            "ticket_id": np.arange(1, n_tix + 1),
            "customer_id": rng.choice(customers.customer_id, n_tix, p=weight / weight.sum()),
            "agent_id": agent,
            "priority": priority,
            "channel": rng.choice(["email", "chat", "phone"], n_tix, p=[0.5, 0.35, 0.15]),
            "opened_at": opened.strftime("%Y-%m-%d %H:%M:%S"),
            "closed_at": np.where(still_open, None, closed.strftime("%Y-%m-%d %H:%M:%S")),
        }
    )
    rows = []
    done = tickets[tickets.closed_at.notna()]
    for tid, closed_at in zip(done.ticket_id, done.closed_at):
        if rng.random() > 0.6:
            continue
        when = pd.Timestamp(closed_at) + pd.Timedelta(minutes=int(rng.integers(5, 3000)))
        for _ in range(2 if rng.random() < 0.15 else 1):
            rows.append(
                {
                    "ticket_id": int(tid),
                    "submitted_at": when.strftime("%Y-%m-%d %H:%M:%S"),
                    "score": int(rng.choice([1, 2, 3, 4, 5], p=[0.06, 0.09, 0.2, 0.35, 0.3])),
                }
            )
            when += pd.Timedelta(minutes=int(rng.integers(10, 4000)))
    surveys = (
        pd.DataFrame(rows)
        .sort_values(["submitted_at", "ticket_id"], kind="stable")
        .reset_index(drop=True)
    )
    surveys.insert(0, "survey_id", np.arange(1, len(surveys) + 1))
    return {"agents": agents, "customers": customers, "tickets": tickets, "surveys": surveys}


def make_budget_wb(rng: np.random.Generator) -> dict[str, pd.DataFrame]:
    """2024 expenses in four currencies (text amounts, text and real dates, blanks) plus lookup
    sheets."""
    names = [
        "Engineering",
        "Finance",
        "Legal",
        "Marketing",
        "Operations",
        "People",
        "Sales",
        "Support",
    ]
    managers = ["Ana Silva", "Chen Kim", "Eva Rossi", "Kofi Okafor", "Leo Berg", "Maya Patel"]
    codes = [f"D{i:02d}" for i in range(1, len(names) + 1)]
    departments = pd.DataFrame(
        {
            "dept_code": codes,
            "department": names,
            "manager": [managers[i] for i in rng.choice(len(managers), len(names))],
            "cost_center": [f"CC-{100 + 10 * i}" for i in range(len(names))],
        }
    )
    fx = pd.DataFrame(
        {"currency": ["USD", "EUR", "GBP", "JPY"], "usd_per_unit": [1.0, 1.08, 1.27, 0.0067]}
    )
    rate = dict(zip(fx.currency, fx.usd_per_unit))
    size = {c: rng.uniform(0.5, 2.0) for c in codes}
    n = 700
    dept = rng.choice(codes, n, p=mix_weights(rng, len(codes)))
    currency = rng.choice(fx.currency, n, p=[0.55, 0.25, 0.12, 0.08])
    category = rng.choice(
        ["Consulting", "Hardware", "Meals", "Software", "Training", "Travel"], n
    ).astype(object)
    category[rng.random(n) < 0.05] = None
    usd = rng.gamma(1.6, 900, n) * np.array([size[d] for d in dept])
    local = usd / np.array([rate[c] for c in currency])
    local = np.where(currency == "JPY", np.round(local), np.round(local, 2))
    days = np.sort(rng.integers(0, 366, n))
    dates = [dt.datetime(2024, 1, 1) + dt.timedelta(days=int(d)) for d in days]
    as_text = rng.random(n) < 0.4
    date_cells = [d.strftime(EXPENSE_TEXT_DATE) if t else d for d, t in zip(dates, as_text)]
    text_amount = rng.random(n) < 0.4
    amount_cells = [f"{a:,.2f}" if t else float(a) for a, t in zip(local, text_amount)]
    approved = rng.choice(["Y", "N"], n, p=[0.85, 0.15]).astype(object)
    approved[rng.random(n) < 0.07] = None
    expenses = pd.DataFrame(
        {
            "expense_id": [f"X{i:04d}" for i in range(1, n + 1)],
            "date": pd.Series(date_cells, dtype=object),
            "dept_code": dept,
            "category": category,
            "currency": currency,
            "amount": pd.Series(amount_cells, dtype=object),
            "approved": approved,
        }
    )
    monthly = {c: usd[dept == c].sum() / 12 for c in codes}
    budget = pd.DataFrame({"dept_code": codes})
    for m in MONTHS:
        budget[m] = [float(round(monthly[c] * rng.uniform(0.7, 1.3), -2)) for c in codes]
    return {"Expenses": expenses, "Departments": departments, "Budget": budget, "FX": fx}


def make_timesheets_wb(rng: np.random.Generator) -> dict[str, pd.DataFrame]:
    """Weekly hours per person and project (blank = not submitted, some double submissions) plus
    rates."""
    teams = ["Backend", "Design", "Frontend", "QA"]
    n_staff = 30
    staff = pd.DataFrame(
        {
            "staff_id": [f"S{i:02d}" for i in range(1, n_staff + 1)],
            "name": person_names(rng, n_staff),
            "team": rng.choice(teams, n_staff),
            "hourly_rate": np.round(rng.uniform(45, 140, n_staff), 0),
        }
    )
    clients = ["Acme Corp", "Globex", "Initech", "Umbrella"]
    projects = pd.DataFrame(
        {
            "project": [f"P-{100 + i}" for i in range(12)],
            "client": [clients[i] for i in rng.choice(len(clients), 12)],
            "budget_hours": rng.integers(60, 160, 12) * 10,
        }
    )
    rows = []
    weeks = [dt.datetime(2024, 1, 1) + dt.timedelta(weeks=w) for w in range(13)]
    for sid in staff.staff_id:
        mine = rng.choice(projects.project, int(rng.integers(1, 4)), replace=False)
        for week in weeks:
            for p in mine:
                if rng.random() < 0.15:
                    continue
                rows.append(
                    {
                        "staff_id": sid,
                        "week_start": week,
                        "project": p,
                        "hours": float(np.round(rng.uniform(2, 30) * 2) / 2),
                    }
                )
    hours = pd.DataFrame(rows)
    hours.loc[rng.random(len(hours)) < 0.04, "hours"] = np.nan
    hours = _with_duplicates(rng, hours, 0.05)
    return {"Hours": hours, "Staff": staff, "Projects": projects}
