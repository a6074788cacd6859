"""Execution accuracy for text-to-SQL tasks (Spider, KaggleDBQA), as test-suite-sql-eval scores it.

The scorer ``sql_execution`` runs the gold query and the answer on the task's
one database and compares the results as the official Spider metric does
(the distilled test-suite databases are not part of the public data). Its
parts, one module each:

- :mod:`~analyst_env.verifiers.sql_readonly`: running one query so that it can
  only read, within time, row and byte limits;
- :mod:`~analyst_env.verifiers.sql_compare`: the official preprocessing
  (``DISTINCT`` removal, spacing, ``YEAR(CURDATE())``) and the result-table
  comparison (multisets of rows, order only under ``order by``, columns permuted);
- :mod:`~analyst_env.verifiers.sql_answer`: reading the answer, a query or
  its result values.

The scorer never raises: whatever fails scores 0.0 with the reason in
``Verdict.detail``.

Example:
    >>> results_match([(1, "a"), (2, "b")], [("b", 2), ("a", 1)], order_matters=False)
    True
    >>> extract_sql("```sql\\nSELECT 1;\\n```")
    'SELECT 1'
"""

from __future__ import annotations

from typing import Any

from analyst_env.verifiers.sql_answer import (
    canonical,
    extract_sql,
    read_result_values,
    strip_fences,
    values_match,
)
from analyst_env.verifiers.sql_compare import (
    MAX_PERMUTATIONS,
    official_preprocess,
    order_matters,
    remove_distinct,
    results_match,
)
from analyst_env.verifiers.sql_readonly import (
    DEFAULT_MAX_ROWS,
    DEFAULT_TIMEOUT_S,
    MAX_RESULT_BYTES,
    MAX_VALUE_BYTES,
    Row,
    SqlRunError,
    run_readonly,
)
from analyst_env.verifiers.verdict import Verdict, VerifyContext

SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")


def database_path(context: VerifyContext, db: str | None) -> str | None:
    """The host path of the task database ``db``, or of its only SQLite file; None if none."""
    files = context.task_files
    if db is not None:
        return files.get(db)
    found = [path for name, path in files.items() if name.lower().endswith(SQLITE_SUFFIXES)]
    return found[0] if len(found) == 1 else None


def _rows(n: int) -> str:
    return f"{n} row{'s' if n != 1 else ''}"


def sql_execution(
    submitted: str,
    gold: Any,
    *,
    context: VerifyContext,
    db: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_rows: int = DEFAULT_MAX_ROWS,
    keep_distinct: bool | None = None,
    order_rule: str = "official",
    profile: str = "strict",
) -> Verdict:
    """Execution accuracy of a SQL (or result-values) answer against the gold query.

    Args:
        submitted: The answer: one SQLite query, or the result values (see the module docstring).
        gold: The gold SQL query.
        context: Gives the task's database (``context.task_files``).
        db: Name of the database among the task files; default: the only SQLite file.
        timeout_s: Time limit for each of the gold and the predicted query.
        max_rows: Row limit for each query.
        keep_distinct: Keep ``DISTINCT`` in SQL answers and gold (upstream's
            ``--keep_distinct``). Default by profile: kept under ``strict``
            (otherwise ``SELECT name`` with duplicates matches a ``SELECT
            DISTINCT name`` gold), removed under ``official`` as upstream does.
        profile: ``"strict"`` (default) or ``"official"``.
        order_rule: When row order counts; see :func:`order_matters`.

    Returns:
        1.0 if the results match, else 0.0, with components ``executes``
        (SQL answers) or ``values_parsed`` (typed values), and ``result_match``.
    """
    if keep_distinct is None:
        keep_distinct = profile != "official"
    if not isinstance(gold, str) or not gold.strip():
        return Verdict(0.0, {"result_match": 0.0}, "task has no gold SQL")
    path = database_path(context, db)
    if path is None:
        return Verdict(
            0.0, {"result_match": 0.0}, f"task has no database file {db or '(*.sqlite)'}"
        )
    if not submitted.strip():
        return Verdict(0.0, {"result_match": 0.0}, "empty answer")
    ordered = order_matters(gold, order_rule)
    order_note = "row order checked" if ordered else "row order ignored"

    sql = extract_sql(submitted)
    sql_error = None
    if sql is not None:
        try:
            gold_rows = run_readonly(
                path, official_preprocess(gold, keep_distinct), timeout_s, max_rows
            )
        except SqlRunError as exc:
            return Verdict(0.0, {"result_match": 0.0}, f"gold query failed: {exc}")
        try:
            pred_rows = run_readonly(
                path, official_preprocess(sql, keep_distinct), timeout_s, max_rows
            )
        except SqlRunError as exc:
            sql_error = str(exc)
        else:
            match = results_match(gold_rows, pred_rows, ordered)
            detail = (
                f"SQL answer executed: {_rows(len(pred_rows))} vs gold {_rows(len(gold_rows))}; "
                f"{'results match' if match else 'results differ'} ({order_note})"
            )
            return Verdict(float(match), {"executes": 1.0, "result_match": float(match)}, detail)

    readings = read_result_values(submitted)
    if sql_error is not None and not readings:
        return Verdict(
            0.0, {"executes": 0.0, "result_match": 0.0}, f"SQL answer failed: {sql_error}"
        )
    try:
        gold_rows = run_readonly(path, gold, timeout_s, max_rows)
    except SqlRunError as exc:
        return Verdict(0.0, {"result_match": 0.0}, f"gold query failed: {exc}")
    match = any(values_match(gold_rows, reading, ordered) for reading in readings)
    if sql_error is not None:
        detail = f"SQL answer failed: {sql_error}; read as values it does not match"
        return Verdict(float(match), {"executes": 0.0, "result_match": float(match)}, detail)
    detail = (
        f"values answer ({len(readings)} reading(s)) vs gold {_rows(len(gold_rows))}: "
        f"{'match' if match else 'no reading matches'} ({order_note})"
    )
    return Verdict(
        float(match), {"values_parsed": float(bool(readings)), "result_match": float(match)}, detail
    )


__all__ = [
    "DEFAULT_MAX_ROWS",
    "DEFAULT_TIMEOUT_S",
    "MAX_PERMUTATIONS",
    "MAX_RESULT_BYTES",
    "MAX_VALUE_BYTES",
    "SQLITE_SUFFIXES",
    "Row",
    "SqlRunError",
    "canonical",
    "database_path",
    "extract_sql",
    "official_preprocess",
    "order_matters",
    "read_result_values",
    "remove_distinct",
    "results_match",
    "run_readonly",
    "sql_execution",
    "strip_fences",
]
