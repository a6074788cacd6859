"""The DuckDB SQL style of a worked solution: the computation as SQL over the cleaned frame.

An analyst who thinks in SQL still tidies the files in pandas (currency text,
two date formats, units, time zones are easier there) and then asks DuckDB:
``duckdb.sql("SELECT ... FROM df")`` reads the cleaned ``df`` of the notebook
in place. Before that, a ``run_sql`` call looks at the raw table through the
environment's own SQL tool, when its table name is certain (see
:func:`look`). Ops with no SQL form here fall back to the pandas computation
(:func:`scalar` returns None); ``solutions`` composes the cells.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from analyst_env.task_format import ToolCall

_AGG = {
    "sum": "SUM({c})",
    "mean": "AVG({c})",
    "min": "MIN({c})",
    "max": "MAX({c})",
    "median": "quantile_cont({c}, 0.5)",
    "std": "stddev_samp({c})",
}
_LABELS = {
    "month": """strftime("date", '%Y-%m')""",
    "quarter": """CAST(year("date") AS VARCHAR) || '-Q' || CAST(quarter("date") AS VARCHAR)""",
    "pivot": "g1 || '|' || g2",
}
SQL_OPS = ("count", "agg", "missing", "percentile", "iqr", "corr", "group", "funnel_both")
"""The ops whose answer the SQL style computes in SQL; the rest fall back to pandas."""


def quote(name: str) -> str:
    """``name`` as a DuckDB identifier."""
    return '"' + name.replace('"', '""') + '"'


def _lit(value: object) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def _one(query: str) -> str:
    return f"answer = duckdb.sql({query!r}).fetchall()[0][0]"


def scalar(plan: dict) -> str | None:
    """The cell computing ``answer`` in DuckDB SQL, or None for an op without a SQL form."""
    name, *a = plan["query"]["op"]
    if name == "count":
        return _one("SELECT COUNT(*) FROM df")
    if name == "missing":
        return _one(f"SELECT COUNT(*) - COUNT({quote(a[0])}) FROM df")
    if name == "agg":
        fn, role = a
        if fn == "count":
            return _one("SELECT COUNT(*) FROM df")
        if fn == "nunique":
            return _one('SELECT COUNT(DISTINCT "key") FROM df')
        return _one(f"SELECT {_AGG[fn].format(c=quote(role))} FROM df")
    if name == "percentile":
        return _one(f"SELECT quantile_cont({quote(a[0])}, {a[1] / 100!r}) FROM df")
    if name == "iqr":
        return _one(
            "SELECT quantile_cont({c}, 0.75) - quantile_cont({c}, 0.25) FROM df".format(
                c=quote(a[0])
            )
        )
    if name == "corr":
        return _one(f"SELECT corr({quote(a[0])}, {quote(a[1])}) FROM df")
    if name == "funnel_both":
        return _one(
            f'SELECT COUNT(*) FROM (SELECT "key" FROM df WHERE g2 = {_lit(a[0])} '
            f'INTERSECT SELECT "key" FROM df WHERE g2 = {_lit(a[1])})'
        )
    return None


def label(by: str) -> str:
    """The SQL expression of a grouping's label: a role's column, a month, a quarter, a pair."""
    return _LABELS.get(by, quote(by))


def grouped(by: str, fn: str, role: str) -> str:
    """The cell line making ``per`` (label -> value, labels in order) with a GROUP BY."""
    label_ = label(by)
    if fn == "count":
        value = "COUNT(*)"
    elif fn == "nunique":
        value = 'COUNT(DISTINCT "key")'
    elif fn == "sum":  # pandas sums a group of missing values to 0
        value = f"COALESCE(SUM({quote(role)}), 0)"
    else:
        value = _AGG[fn].format(c=quote(role))
    query = (
        f"SELECT {label_} AS label, CAST({value} AS DOUBLE) AS v FROM df "
        f"WHERE {label_} IS NOT NULL GROUP BY 1 ORDER BY 1"
    )
    return f"per = duckdb.sql({query!r}).df().set_index('label')['v'].dropna()"


def _ident(stem: str) -> str:
    """The name the environment's SQL tool gives a CSV file's view (as ``kernel_helpers``)."""
    name = re.sub(r"\W+", "_", stem).strip("_").lower() or "t"
    return "t_" + name if name[0].isdigit() else name


def look(plan: dict) -> ToolCall | None:
    """A ``run_sql`` count of the raw fact table, when its name in the SQL tool is certain:
    the fact table of the only SQLite file, or a CSV file with no SQLite file beside it."""
    fact_file, fact_table = plan["fact"]
    files = [fact_file] + ([plan["dim"][0]] if plan["dim"] else [])
    sqlite = {f for f in files if f.endswith(".sqlite")}
    if fact_file.endswith(".sqlite") and sqlite == {fact_file}:
        table = quote(fact_table)
    elif fact_file.endswith(".csv") and not sqlite:
        table = _ident(PurePosixPath(fact_file).stem)
    else:
        return None
    return ToolCall(tool="run_sql", arguments={"query": f"SELECT COUNT(*) AS n_rows FROM {table}"})


__all__ = ["SQL_OPS", "grouped", "label", "look", "quote", "scalar"]
