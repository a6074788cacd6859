"""Each analyst skill the starter set claims has tasks whose answers survive an independent
recomputation.

Window functions, pivots, time zones, missing values, dirty types, duplicated
keys and multi-sheet lookups are recomputed here straight from the files on
disk with plain ``csv``/``zoneinfo``, SQL window functions in ``sqlite3`` and
raw ``openpyxl`` cells, sharing no code with the generator's pandas reference.
"""

import csv
import datetime as dt
import math
import sqlite3
from collections import Counter, defaultdict
from zoneinfo import ZoneInfo

import openpyxl
import pandas as pd
import pytest

from analyst_env.verifiers import score

SKILLS = {
    "window functions": [
        "sales_cumulative_cross",
        "sales_mom_jump",
        "sen_max_hourly_rise",
        "sen_rolling_max",
        "rt_mean_gap_days",
        "sp_agent_rank",
        "sp_quick_return",
        "sp_running_count",
        "fi_cumulative_target",
        "ts_week_jump",
        "ev_median_gap",
    ],
    "pivots": [
        "sales_pivot_gap",
        "fi_pivot_line_region",
        "inv_pivot_wh_category",
        "bu_pivot_top_department",
        "ts_pivot_team_project",
        "bu_peak_budget_month",
    ],
    "time zones": [
        "ev_local_day_purchases",
        "ev_local_day_revenue",
        "ev_busiest_local_hour",
        "ev_date_shift",
    ],
    "missing values": [
        "tx_missing_amount",
        "sp_open_count",
        "sp_unassigned",
        "bu_missing_category",
        "ts_blank_rows",
        "tx_payment_missing_share",
        "bu_unapproved_share",
        "tx_category_units",
        "emp_level_score",
    ],
    "dirty types": ["tx_store_total", "tx_month_total", "bu_dept_spend", "bu_month_spend"],
    "duplicated keys": [
        "tx_distinct_count",
        "tx_repeated_ids",
        "sp_team_csat_latest",
        "ts_duplicate_rows",
        "ts_project_hours",
    ],
    "multi-sheet lookups": [
        "bu_dept_spend",
        "bu_over_budget",
        "ts_client_cost",
        "ts_over_budget",
        "inv_rank_in_wh",
    ],
}


def by_template(ds, name):
    found = [t for t in ds.tasks if t.metadata["template"] == name]
    assert found, f"no task from template {name}"
    return found


def close(value, task):
    """Within the rounding the question asks for (2 decimals), whatever the summation order."""
    return math.isclose(value, task.answer, abs_tol=0.006)


def sheet_rows(path, sheet):
    wb = openpyxl.load_workbook(path, read_only=True)
    try:
        rows = list(wb[sheet].iter_rows(values_only=True))
    finally:
        wb.close()
    return [dict(zip(rows[0], r)) for r in rows[1:]]


def money(cell):
    if cell is None or cell in ("", "N/A"):
        return None
    return float(str(cell).replace("$", "").replace(",", ""))


def sql(task, query, *args):
    con = sqlite3.connect(f"file:{task.files['support.sqlite']}?mode=ro", uri=True)
    try:
        return con.execute(query, args).fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("skill", sorted(SKILLS))
def test_each_skill_has_tasks_at_several_levels(starter, skill):
    tasks = [t for name in SKILLS[skill] for t in by_template(starter, name)]
    assert len(tasks) >= 8, (skill, len(tasks))
    assert len({t.metadata["level"] for t in tasks}) >= 2, skill
    for t in tasks:
        assert score(t.verifier, t.oracle_answer, t.answer) == 1.0, t.id


# ---- window functions ---------------------------------------------------------------------


def test_sql_rank_within_team(starter):
    for t in by_template(starter, "sp_agent_rank"):
        p = t.metadata["params"]
        rows = sql(
            t,
            "SELECT name, RANK() OVER (ORDER BY COUNT(*) DESC) FROM tickets JOIN agents "
            "USING (agent_id) WHERE closed_at IS NOT NULL AND team = ? GROUP BY name",
            p["team"],
        )
        assert [n for n, r in rows if r == p["rank"]] == [t.answer], t.id


def test_sql_lag_gap_to_previous_ticket(starter):
    for t in by_template(starter, "sp_quick_return"):
        ((v,),) = sql(
            t,
            "SELECT COUNT(*) FROM (SELECT julianday(opened_at) - LAG(julianday(opened_at)) OVER "
            "(PARTITION BY customer_id ORDER BY opened_at, ticket_id) AS gap FROM tickets) "
            "WHERE gap <= ? + 1e-9",
            t.metadata["params"]["days"],
        )
        assert v == t.answer, t.id


def test_running_total_crossing(starter):
    for t in by_template(starter, "sales_cumulative_cross"):
        p = t.metadata["params"]
        monthly = defaultdict(float)
        with open(t.files["sales.csv"], newline="") as f:
            for row in csv.DictReader(f):
                if row["region"] == p["region"] and row["order_date"].startswith(str(p["year"])):
                    monthly[row["order_date"][:7]] += float(row["revenue"])
        total, running = sum(monthly.values()), 0.0
        for month in sorted(monthly):
            running += monthly[month]
            if running >= total * p["percent"] / 100:
                break
        assert month == t.answer, t.id


def test_hourly_rise_lag(starter):
    for t in by_template(starter, "sen_max_hourly_rise"):
        with open(t.files["sensors.csv"], newline="") as f:
            temps = [
                r["temperature_c"]
                for r in csv.DictReader(f)
                if r["site"] == t.metadata["params"]["site"]
            ]
        rises = [float(b) - float(a) for a, b in zip(temps, temps[1:]) if a and b]
        assert close(max(rises), t), t.id


# ---- pivots -------------------------------------------------------------------------------


def test_crosstab_pivot(starter):
    for t in by_template(starter, "sales_pivot_gap"):
        df = pd.read_csv(t.files["sales.csv"])
        df = df[df.order_date.str.startswith(str(t.metadata["params"]["year"]))]
        table = pd.crosstab(df.region, df.channel, values=df.revenue, aggfunc="sum")
        assert (table.Online - table.Store).idxmax() == t.answer, t.id


def test_budget_pivot_from_cells(starter):
    for t in by_template(starter, "bu_pivot_top_department"):
        path = t.files["budget.xlsx"]
        names = {r["dept_code"]: r["department"] for r in sheet_rows(path, "Departments")}
        rate = {r["currency"]: r["usd_per_unit"] for r in sheet_rows(path, "FX")}
        cell = defaultdict(float)
        for r in sheet_rows(path, "Expenses"):
            if r["category"] == t.metadata["params"]["category"] and money(r["amount"]) is not None:
                cell[names[r["dept_code"]]] += money(r["amount"]) * rate[r["currency"]]
        assert max(cell, key=cell.get) == t.answer, t.id


# ---- dates and time zones -------------------------------------------------------------------


def test_local_day_with_zoneinfo(starter):
    for t in by_template(starter, "ev_local_day_purchases"):
        p = t.metadata["params"]
        zone = ZoneInfo(p["zone"])
        with open(t.files["events.csv"], newline="") as f:
            n = sum(
                1
                for r in csv.DictReader(f)
                if r["event_type"] == "purchase"
                and dt.datetime.fromisoformat(r["ts_utc"].replace("Z", "+00:00"))
                .astimezone(zone)
                .date()
                .isoformat()
                == p["date"]
            )
        assert n == t.answer, t.id


def test_time_zone_questions_span_dst_changes(starter):
    """The data crosses DST switches, so a fixed UTC offset gives wrong local days."""
    t = by_template(starter, "ev_date_shift")[0]
    stamps = pd.read_csv(t.files["events.csv"]).ts_utc.iloc[[0, -1]]
    for zone in ("America/New_York", "Europe/Berlin", "Australia/Sydney"):
        offsets = {
            dt.datetime.fromisoformat(s.replace("Z", "+00:00"))
            .astimezone(ZoneInfo(zone))
            .utcoffset()
            for s in stamps
        }
        assert len(offsets) == 2, zone


# ---- missing values, dirty types, duplicated keys ------------------------------------------------


def test_open_tickets_are_null(starter):
    for t in by_template(starter, "sp_open_count"):
        ((v,),) = sql(
            t,
            "SELECT COUNT(*) FROM tickets WHERE closed_at IS NULL AND priority = ?",
            t.metadata["params"]["priority"],
        )
        assert v == t.answer, t.id


def test_text_amounts_deduplicated(starter):
    for t in by_template(starter, "tx_store_total"):
        seen, total = set(), 0.0
        with open(t.files["transactions.csv"], newline="") as f:
            for r in csv.DictReader(f):
                if r["txn_id"] in seen:
                    continue
                seen.add(r["txn_id"])
                if r["store"] == t.metadata["params"]["store"] and money(r["amount"]) is not None:
                    total += money(r["amount"])
        assert close(total, t), t.id


def test_mixed_date_formats(starter):
    def parse(text):
        for fmt in ("%Y-%m-%d", "%m/%d/%Y", "%d %b %Y"):
            try:
                return dt.datetime.strptime(text, fmt)
            except ValueError:
                pass
        raise AssertionError(f"unparsed date {text!r}")

    for t in by_template(starter, "tx_month_total"):
        rows = {}
        with open(t.files["transactions.csv"], newline="") as f:
            for r in csv.DictReader(f):
                rows.setdefault(r["txn_id"], r)
        formats = Counter(("-" in r["txn_date"], "/" in r["txn_date"]) for r in rows.values())
        assert len(formats) == 3, "all three date formats occur"
        total = sum(
            money(r["amount"]) or 0.0
            for r in rows.values()
            if parse(r["txn_date"]).month == t.metadata["params"]["month"]
        )
        assert close(total, t), t.id


def test_latest_survey_with_row_number(starter):
    for t in by_template(starter, "sp_team_csat_latest"):
        ((v,),) = sql(
            t,
            "SELECT AVG(score) FROM (SELECT ticket_id, score, ROW_NUMBER() OVER (PARTITION "
            "BY ticket_id ORDER BY submitted_at DESC, survey_id DESC) AS rn FROM surveys) s "
            "JOIN tickets USING (ticket_id) JOIN agents USING (agent_id) WHERE rn = 1 AND team = ?",
            t.metadata["params"]["team"],
        )
        assert math.isclose(round(v, 3), t.answer, abs_tol=1e-9), t.id


def test_double_submissions_and_cross_sheet_rates(starter):
    for t in by_template(starter, "ts_client_cost"):
        path = t.files["timesheets.xlsx"]
        rate = {r["staff_id"]: r["hourly_rate"] for r in sheet_rows(path, "Staff")}
        client = {r["project"]: r["client"] for r in sheet_rows(path, "Projects")}
        unique = {tuple(r.values()): r for r in sheet_rows(path, "Hours")}.values()
        cost = sum(
            r["hours"] * rate[r["staff_id"]]
            for r in unique
            if r["hours"] is not None and client[r["project"]] == t.metadata["params"]["client"]
        )
        assert close(cost, t), t.id
    for t in by_template(starter, "ts_duplicate_rows"):
        rows = [tuple(r.values()) for r in sheet_rows(t.files["timesheets.xlsx"], "Hours")]
        assert len(rows) - len(set(rows)) == t.answer


def test_blank_excel_cells(starter):
    for t in by_template(starter, "bu_missing_category"):
        assert (
            sum(r["category"] is None for r in sheet_rows(t.files["budget.xlsx"], "Expenses"))
            == t.answer
        )


# ---- the reference parsers
# ------------------------------------------------------------------------
