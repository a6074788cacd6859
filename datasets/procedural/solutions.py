"""A worked solution for a procedural task: the notebook cells an analyst runs, built from its plan.

``build(plan, style)`` returns the tool calls (load the files, repair what the
instruction says is untidy, compute, print the answer in the asked format);
the answer is whatever the last cell prints, computed from the files in the
sandbox, never copied from the gold. The builder dispatches on the query's op
(see ``query``); a template whose op has no solution yet raises
:class:`NoSolution` naming it, so a new category is reported, not crashed on.

Covered: every op of ``query`` answered in words (``COVERED_OPS``; a ``findings`` task's
two sub-queries, then the sentence its rubric checks), and the answers saved as files: a
workbook (``solutions_books``: result-workbook and excel-edit) and a figure
(``solutions_charts``: charts), whose last cell saves the file. Styles: ``pandas`` (cells
only), ``mixed`` (a shell look at the files, then cells) and ``sql`` (a ``run_sql`` look at
the raw table, the files tidied in pandas, the answer computed in DuckDB SQL over the tidy
frame where ``solutions_sql`` has a SQL form for the op, in pandas otherwise).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from analyst_env.datasets.procedural import solutions_books, solutions_charts, solutions_sql
from analyst_env.task_format import ToolCall

STYLES = ("pandas", "mixed", "sql")
COVERED_OPS = (
    *("count", "agg", "missing", "raw", "group", "percentile", "iqr", "corr", "welch", "zcount"),
    *("iqr_outliers", "growth", "rolling_max", "daily_jump", "top_per_group", "group_topn_mean"),
    *("running_share", "cohort", "funnel_both", "set_only", "finding"),
)
COVERED_ANSWERS = ("number", "integer", "text", "set", "list", "pair", "finding")


class NoSolution(Exception):
    """No solution can be built for this task's template (yet); the message names it."""


def style_for(task_id: str) -> str:
    """The solution style of a task, drawn deterministically from its id."""
    return STYLES[hashlib.sha256(task_id.encode()).digest()[0] % len(STYLES)]


def _load(plan: dict) -> str:
    def one(var: str, file: str, table: str | None) -> str:
        if file.endswith(".sqlite"):
            return (
                f"{var} = pd.read_sql_query('SELECT * FROM \"{table}\"', sqlite3.connect({file!r}))"
            )
        if file.endswith(".xlsx"):
            return f"{var} = pd.read_excel({file!r}, sheet_name={table!r})"
        return f"{var} = pd.read_csv({file!r})"

    lines = ["import json, sqlite3", "import numpy as np, pandas as pd", one("raw", *plan["fact"])]
    if plan["dim"]:
        lines.append(one("dim", *plan["dim"]))
    lines += ["print(raw.shape)", "raw.head()"]
    return "\n".join(lines)


def _clean(plan: dict) -> str:
    c, mess = plan["cols"], set(plan["mess"])
    lines = ["fact = raw.drop_duplicates()" if "duplicates" in mess else "fact = raw"]
    lines.append(
        f"m1 = pd.to_numeric(fact[{c['m1']!r}].astype('string').str.replace(r'[$,]', '', "
        "regex=True), errors='coerce').astype(float)"
    )
    if plan["units"]:
        other, factor = plan["units"]
        lines.append(f"m1 = m1.where(fact[{c['unit']!r}] != {other!r}, m1 / {factor})")
    if "timezones" in mess:
        lines.append(
            f"dates = pd.to_datetime(fact[{c['date']!r}].astype(str), format='ISO8601', utc=True)"
            ".dt.tz_localize(None).dt.normalize()"
        )
    else:
        lines.append(
            f"text = fact[{c['date']!r}].astype(str)\n"
            "dates = pd.to_datetime(text, format='%Y-%m-%d', errors='coerce')"
            ".fillna(pd.to_datetime(text, format='%d/%m/%Y', errors='coerce'))"
        )
    lines.append(
        "df = pd.DataFrame({"
        f"'id': fact[{c['id']!r}].astype(str), 'date': dates, 'g1': fact[{c['g1']!r}].astype(str), "
        f"'g2': fact[{c['g2']!r}].astype(str), 'key': fact[{c['key']!r}].astype(str), 'm1': m1, "
        f"'m2': pd.to_numeric(fact[{c['m2']!r}].astype('string').str.replace(r'[$,]', '', "
        "regex=True), errors='coerce').astype(float)})"
    )
    if plan["dim"]:
        lines.append(
            f"df['attr'] = df['key'].map(dict(zip(dim[{c['key']!r}].astype(str), "
            f"dim[{c['attr']!r}].astype(str))))"
        )
    q = plan["query"]
    if any(f[0] == "attr" for f in q["filters"]) or "attr" in q["op"]:
        lines.append("df = df.dropna(subset=['attr'])  # rows whose key the lookup table lacks")
    for role, op, value in q["filters"]:
        cond = {
            "eq": f"df[{role!r}] == {value!r}",
            "gt": f"df[{role!r}] > {value!r}",
            "lt": f"df[{role!r}] < {value!r}",
            "year": f"df['date'].dt.year == {value!r}",
            "month": f"df['date'].dt.strftime('%Y-%m') == {value!r}",
        }[op]
        lines.append(f"df = df[{cond}]")
    lines.append("print(len(df), 'records')")
    return "\n".join(lines)


_AGG = {
    "sum": "s.sum()",
    "mean": "s.mean()",
    "min": "s.min()",
    "max": "s.max()",
    "median": "s.median()",
    "std": "s.std(ddof=1)",
}


def _grouped(by: str, fn: str, role: str) -> str:
    labels = solutions_books.LABELS.get(by, f"df[{by!r}]")
    if fn == "count":
        return f"per = df.groupby({labels}).size().astype(float)"
    if fn == "nunique":
        return f"per = df.groupby({labels})['key'].nunique().astype(float)"
    method = "std(ddof=1)" if fn == "std" else f"{fn}()"
    return f"per = df.groupby({labels})[{role!r}].{method}.dropna()"


def _compute(plan: dict, sql: bool = False) -> str:
    op = plan["query"]["op"]
    name, *a = op
    if sql and name != "group" and (in_sql := solutions_sql.scalar(plan)) is not None:
        return in_sql
    if name == "finding":  # two sub-queries over the same rows: the change, then the leader
        change, leader = (_compute({**plan, "query": {**plan["query"], "op": o}}, sql) for o in a)
        return f"{change}\ngrowth = answer\n{leader}\nleader = answer"
    if name == "count":
        return "answer = len(df)"
    if name == "missing":
        return f"answer = int(df[{a[0]!r}].isna().sum())"
    if name == "raw":
        c = plan["cols"]
        if a[0] == "duplicates":
            return "answer = int(raw.duplicated().sum())"
        if a[0] == "orphan_keys":
            return (
                f"keys = set(raw[{c['key']!r}].astype(str))\n"
                f"answer = len(keys - set(dim[{c['key']!r}].astype(str)))"
            )
    if name == "agg":
        fn, role = a
        if fn == "count":
            return "answer = len(df)"
        if fn == "nunique":
            return "answer = df['key'].nunique()"
        return f"s = df[{role!r}].dropna()\nanswer = {_AGG[fn]}"
    if name == "percentile":
        return f"answer = np.percentile(df[{a[0]!r}].dropna(), {a[1]!r})"
    if name == "iqr":
        return f"s = df[{a[0]!r}].dropna()\nanswer = np.percentile(s, 75) - np.percentile(s, 25)"
    if name == "corr":
        x, y = a[0], a[1]
        return f"pair = df[[{x!r}, {y!r}]].dropna()\nanswer = pair[{x!r}].corr(pair[{y!r}])"
    if name in _MORE:
        return _MORE[name](*a)
    if name == "group":
        by, fn, role, reducer = a
        rname, *rargs = reducer
        per = solutions_sql.grouped(by, fn, role) if sql else _grouped(by, fn, role)
        lines = [per, "print(per.sort_values(ascending=False).head(10))"]
        if rname in ("argmax", "argmin", "top", "bottom", "kth"):
            asc = rname in ("argmin", "bottom")
            k = 1 if rname in ("argmax", "argmin") else rargs[0]
            lines.append(f"ordered = per.round(9).sort_values(ascending={asc}, kind='stable')")
            lines.append(
                f"answer = list(ordered.index[:{k}])"
                if rname in ("top", "bottom")
                else f"answer = ordered.index[{k - 1}]"
            )
        elif rname == "value":
            lines.append(f"answer = per[{rargs[0]!r}]")
        elif rname == "share":
            lines.append(f"answer = 100 * per.get({rargs[0]!r}, 0.0) / per.sum()")
        elif rname == "count_above":
            lines.append(f"answer = int((per > {rargs[0]!r}).sum())")
        elif rname == "spread":
            lines.append("answer = per.max() - per.min()")
        else:
            raise NoSolution(f"no solution for reducer {rname!r}")
        return "\n".join(lines)
    raise NoSolution(f"no solution for template {plan['template']} (op {name!r})")


def _welch(role: str, by: str, x: str, y: str) -> str:
    return (
        f"sx = df.loc[df[{by!r}] == {x!r}, {role!r}].dropna()\n"
        f"sy = df.loc[df[{by!r}] == {y!r}, {role!r}].dropna()\n"
        "answer = (sx.mean() - sy.mean()) / np.sqrt(sx.var(ddof=1) / len(sx) + "
        "sy.var(ddof=1) / len(sy))"
    )


def _zcount(role: str, z: float) -> str:
    return (
        f"s = df[{role!r}].dropna()\n"
        f"answer = int((((s - s.mean()) / s.std(ddof=1)).abs() > {z!r}).sum())"
    )


def _iqr_outliers(role: str) -> str:
    return (
        f"s = df[{role!r}].dropna()\nq1, q3 = np.percentile(s, 25), np.percentile(s, 75)\n"
        "answer = int(((s < q1 - 1.5 * (q3 - q1)) | (s > q3 + 1.5 * (q3 - q1))).sum())"
    )


def _growth(a: str, b: str) -> str:
    return (
        "monthly = df.groupby(df['date'].dt.strftime('%Y-%m'))['m1'].sum()\n"
        f"answer = 100 * (monthly[{b!r}] - monthly[{a!r}]) / monthly[{a!r}]"
    )


def _rolling_max(w: int) -> str:
    return (
        "monthly = df.groupby(df['date'].dt.strftime('%Y-%m'))['m1'].sum().sort_index()\n"
        "months = pd.period_range(monthly.index[0], monthly.index[-1], freq='M').astype(str)\n"
        f"answer = monthly.reindex(months, fill_value=0.0).rolling({w}).mean().max()"
    )


def _daily_jump() -> str:
    return (
        "daily = df.groupby(df['date'].dt.strftime('%Y-%m-%d'))['m1'].sum().sort_index()\n"
        "answer = daily.diff().max()"
    )


def _top_per_group(by: str, role: str) -> str:
    return (
        f"s = df.dropna(subset=[{role!r}])\n"
        f"best = s[s[{role!r}] == s.groupby({by!r})[{role!r}].transform('max')]\n"
        "answer = sorted(best['id'])"
    )


def _topn_mean(by: str, role: str, n: int) -> str:
    return (
        f"s = df.dropna(subset=[{role!r}])\n"
        f"top = s.sort_values({role!r}, ascending=False, kind='stable').groupby({by!r}).head({n})\n"
        f"means = top.groupby({by!r})[{role!r}].mean().where(s.groupby({by!r}).size() >= {n})\n"
        "answer = means.dropna().idxmax()"
    )


def _running_share(by: str, label: str, pct: float) -> str:
    return (
        f"s = df[df[{by!r}] == {label!r}].dropna(subset=['m1'])"
        ".sort_values(['date', 'id'], kind='stable')\n"
        "cum = s['m1'].cumsum()\n"
        f"answer = s.loc[cum >= cum.iloc[-1] * {pct!r} / 100, 'date'].iloc[0].strftime('%Y-%m-%d')"
    )


def _cohort(month: str, what: str) -> str:
    count = "len(members)" if what == "size" else f"int((last[members] > {month!r}).sum())"
    return (
        "first = df.groupby('key')['date'].min().dt.strftime('%Y-%m')\n"
        "last = df.groupby('key')['date'].max().dt.strftime('%Y-%m')\n"
        f"members = first[first == {month!r}].index\nanswer = {count}"
    )


def _funnel_both(x: str, y: str) -> str:
    return (
        f"answer = len(set(df.loc[df['g2'] == {x!r}, 'key']) & "
        f"set(df.loc[df['g2'] == {y!r}, 'key']))"
    )


def _set_only(by: str, x: str, y: str) -> str:
    return (
        f"answer = sorted(set(df.loc[df['g2'] == {x!r}, {by!r}]) - "
        f"set(df.loc[df['g2'] == {y!r}, {by!r}]))"
    )


_MORE: dict[str, Callable[..., str]] = {
    "welch": _welch,
    "zcount": _zcount,
    "iqr_outliers": _iqr_outliers,
    "growth": _growth,
    "rolling_max": _rolling_max,
    "daily_jump": _daily_jump,
    "top_per_group": _top_per_group,
    "group_topn_mean": _topn_mean,
    "running_share": _running_share,
    "cohort": _cohort,
    "funnel_both": _funnel_both,
    "set_only": _set_only,
}


def _print(plan: dict) -> str:
    style, d = plan["style"], plan["decimals"]
    if style == "number":
        return f"print(f'{{round(float(answer), {d}):.{d}f}}')"
    if style == "integer":
        return "print(int(answer))"
    if style == "text":
        return "print(answer)"
    if style in ("set", "list"):
        body = "sorted(map(str, answer))" if style == "set" else "[str(v) for v in answer]"
        return f"print(json.dumps({body}))"
    if style == "finding":  # the sentence the rubric checks: direction, percentage, leader
        return (
            "verb = 'fell' if growth < 0 else 'rose'\n"
            "print(f'The monthly total {verb} by {round(abs(growth), 1):.1f}%, "
            "and {leader} has the highest total.')"
        )
    if style == "pair":
        c = plan["cols"]
        return (
            "row, col = str(answer).split('|', 1)\n"
            f"print(f'@{c['g1']}[{{row}}] @{c['g2']}[{{col}}]')"
        )
    raise NoSolution(f"no solution for template {plan['template']} (answer style {style!r})")


def build(plan: dict, style: str = "pandas") -> list[ToolCall]:
    """The tool calls that solve the task of ``plan``, the answer printed by the last one.

    Raises:
        NoSolution: the template's op or answer style has no solution builder.
    """
    if style not in STYLES:
        raise ValueError(f"unknown solution style {style!r}; styles: {', '.join(STYLES)}")
    last = _last(plan, sql=style == "sql")  # raise NoSolution before anything is built
    cell = "add_and_execute_code_cell"
    steps: list[ToolCall] = []
    load = _load(plan)
    if style == "mixed":
        steps.append(ToolCall(tool="execute_shell_command", arguments={"command": "ls -la"}))
    if style == "sql":
        steps += [look] if (look := solutions_sql.look(plan)) is not None else []
        load = "import duckdb\n" + load
    steps += [
        ToolCall(tool=cell, arguments={"code": code})
        # a lookup column edits the file as written: nothing to tidy first
        for code in ([load] if plan.get("style") == "column" else [load, _clean(plan)]) + [last]
    ]
    return steps


def _last(plan: dict, sql: bool = False) -> str:
    """The last cell: the answer computed and printed, or the workbook or figure saved."""
    saved = _SAVED.get(plan.get("style", ""))
    code = saved(plan, sql) if saved else f"{_compute(plan, sql)}\n{_print(plan)}"
    if code is None:
        raise NoSolution(f"no solution for template {plan['template']}: its plan names no file")
    return code


_SAVED: dict[str, Callable[[dict, bool], str | None]] = {
    "workbook": solutions_books.cell,
    "column": solutions_books.cell,
    "chart": solutions_charts.cell,
}


def answer_from(printed: str) -> str:
    """The final answer a solution gives: the last line its last cell printed."""
    lines = [line for line in printed.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def covers(plan: dict) -> bool:
    try:
        _last(plan)
    except NoSolution:
        return False
    return True


__all__ = ["COVERED_OPS", "STYLES", "NoSolution", "answer_from", "build", "covers", "style_for"]
