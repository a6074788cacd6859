"""Execution accuracy for text-to-SQL tasks (Spider, KaggleDBQA), as test-suite-sql-eval scores it.

The official Spider metric (GitHub ``taoyds/test-suite-sql-eval``, ``exec_eval.py``)
runs the gold and the predicted query on the database and compares the two
result tables: as multisets of rows, in order only when the gold query contains
``order by``, and with the columns of the prediction allowed to be permuted.
Before running, both queries get the evaluator's default preprocessing: ``> =``
style spacing fixed, ``YEAR(CURDATE())`` replaced by 2020, and the keyword
``DISTINCT`` removed (its ``--keep_distinct`` flag is off by default). The
scorer ``sql_execution`` does exactly that on the task's one database (the
distilled test-suite databases are not part of the public data).

An analyst agent may answer in either of two forms:

* **A query**: one SQLite ``SELECT``/``WITH`` statement, e.g.
  ``SELECT name, age FROM people WHERE age > 30 ORDER BY age``. A surrounding
  code fence and a trailing ``;`` are removed. It is executed and compared as above.
* **The result values**: a JSON (or Python) list of rows ``[["Alice", 31], ["Bob", 28]]``,
  a single value ``42``, a comma- or newline-separated list ``Alice, Bob`` for a
  one-column result, or the pipe table ``run_sql`` printed, pasted as is. These
  are compared with the gold query's result (``DISTINCT`` kept) by the same table
  rule after normalizing values: numbers compare by value (``3`` equals ``3.0``,
  floats to 12 significant digits), strings exactly after trimming, ``NULL`` is null.

The prediction runs on the host, so it is boxed in: the database is opened
read-only (``mode=ro`` URI), an authorizer allows only reads and function calls
(no ``ATTACH``, ``PRAGMA`` or writes), a progress handler stops it after
``timeout_s``, at most ``max_rows`` rows are fetched, values are capped at
10 MB and the whole result at ``MAX_RESULT_BYTES`` (64 MB, counted row by row
as it is fetched, so ``SELECT zeroblob(9000000) FROM big`` stops after a few
rows instead of filling memory). The server runs the scorer in a child process
with its own memory limit (``verifiers/bounded.py``). The scorer never raises: whatever fails scores 0.0 with the reason in
``Verdict.detail``.

Example:
    >>> results_match([(1, "a"), (2, "b")], [("b", 2), ("a", 1)], order_matters=False)
    True
    >>> results_match([(1, "a"), (2, "b")], [("b", 2), ("a", 1)], order_matters=True)
    False
    >>> extract_sql("```sql\\nSELECT 1;\\n```")
    'SELECT 1'
    >>> remove_distinct("SELECT DISTINCT name, count(DISTINCT x) FROM t WHERE a = 'distinct'")
    "SELECT  name, count( x) FROM t WHERE a = 'distinct'"
"""

from __future__ import annotations

import ast
import json
import math
import re
import sqlite3
import time
import urllib.parse
from collections import Counter
from collections.abc import Iterator
from typing import Any

from analyst_env.verifiers.scorers import register
from analyst_env.verifiers.verdict import Verdict, VerifyContext

Row = tuple[Any, ...]

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MAX_ROWS = 100_000
MAX_VALUE_BYTES = 10_000_000
MAX_RESULT_BYTES = 64_000_000
MAX_PERMUTATIONS = 10_000
SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")

_ALLOWED_ACTIONS = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    sqlite3.SQLITE_RECURSIVE,
}
_DENIED_FUNCTIONS = {"load_extension"}


class SqlRunError(Exception):
    """A query could not be run to completion (error, denied, too slow, too many rows)."""


# --- running a query safely -------------------------------------------------------------------


def _authorize(action: int, arg1: str | None, arg2: str | None, *_: Any) -> int:
    if action not in _ALLOWED_ACTIONS:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _DENIED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def _value_bytes(value: Any) -> int:
    """What a fetched value costs, roughly: its length for text and blobs, 8 bytes otherwise."""
    return len(value) if isinstance(value, (str, bytes)) else 8


def run_readonly(
    db_path: str,
    query: str,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_rows: int = DEFAULT_MAX_ROWS,
    max_bytes: int = MAX_RESULT_BYTES,
) -> list[Row]:
    """Run one query against a read-only connection to ``db_path`` and fetch all rows.

    Text is decoded as the official evaluator does (UTF-8, undecodable bytes dropped).

    Args:
        db_path: Host path of the SQLite database; it is never modified.
        query: One SQL statement.
        timeout_s: Wall-time budget for preparing, running and fetching.
        max_rows: More rows than this is an error.
        max_bytes: A result larger than this (text and blob lengths, 8 bytes per other value) is an error.

    Returns:
        The result rows as tuples.

    Raises:
        SqlRunError: On any SQLite error, a denied action, the time limit, the row or the byte limit.
    """
    uri = "file:" + urllib.parse.quote(str(db_path)) + "?mode=ro"
    try:
        con = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise SqlRunError(f"cannot open database: {exc}") from None
    deadline = time.monotonic() + timeout_s
    try:
        con.text_factory = lambda b: b.decode(errors="ignore")
        con.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        con.set_authorizer(_authorize)
        con.set_progress_handler(lambda: int(time.monotonic() > deadline), 1000)
        try:
            cur = con.execute(query)
            rows: list[Row] = []
            size = 0
            for row in cur:  # one row at a time: the byte cap is checked before the next is fetched
                rows.append(row)
                size += sum(_value_bytes(v) for v in row)
                if len(rows) > max_rows:
                    raise SqlRunError(f"more than {max_rows} rows")
                if size > max_bytes:
                    raise SqlRunError(f"the result is larger than {max_bytes} bytes")
            return rows
        except sqlite3.Error as exc:
            if time.monotonic() > deadline:
                raise SqlRunError(f"time limit of {timeout_s:g} s exceeded") from None
            raise SqlRunError(f"{type(exc).__name__}: {exc}") from None
        except (MemoryError, OverflowError, ValueError) as exc:
            raise SqlRunError(f"{type(exc).__name__}: {exc}") from None
    finally:
        con.close()


# --- the official preprocessing and table comparison ------------------------------------------

# String literals and quoted identifiers are kept whole, so only the keyword DISTINCT goes.
_SQL_TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`|\[[^\]]*\]|\w+|\s+|.", re.S)
_CUR_YEAR = re.compile(r"YEAR\s*\(\s*CURDATE\s*\(\s*\)\s*\)\s*", re.I)


def remove_distinct(query: str) -> str:
    """Drop every ``DISTINCT`` keyword, as test-suite-sql-eval does unless ``--keep_distinct``."""
    return "".join(t for t in _SQL_TOKEN.findall(query) if t.lower() != "distinct")


def official_preprocess(query: str, keep_distinct: bool = False) -> str:
    """The evaluator's rewriting of both queries before execution."""
    query = query.replace("> =", ">=").replace("< =", "<=").replace("! =", "!=")
    query = _CUR_YEAR.sub("2020", query)
    return query if keep_distinct else remove_distinct(query)


def order_matters(gold_sql: str, rule: str = "official") -> bool:
    """Whether row order counts: the gold query has ORDER BY.

    Args:
        gold_sql: The gold query.
        rule: ``"official"``: ``'order by'`` occurs anywhere in the lower-cased
            query (the evaluator's test, so also in a subquery);
            ``"top_level"``: only an ORDER BY outside parentheses counts.

    Example:
        >>> sub = "SELECT a FROM t WHERE b = (SELECT b FROM u ORDER BY c LIMIT 1)"
        >>> order_matters(sub), order_matters(sub, "top_level")
        (True, False)
    """
    if rule == "official":
        return "order by" in gold_sql.lower()
    if rule != "top_level":
        raise ValueError(f"unknown order rule {rule!r}; use 'official' or 'top_level'")
    depth = 0
    tokens = [t for t in _SQL_TOKEN.findall(gold_sql) if not t.isspace()]
    for i, token in enumerate(tokens):
        if token == "(":
            depth += 1
        elif token == ")":
            depth -= 1
        elif (
            depth == 0
            and token.lower() == "order"
            and i + 1 < len(tokens)
            and tokens[i + 1].lower() == "by"
        ):
            return True
    return False


def _column_permutations(candidates: list[list[int]]) -> Iterator[tuple[int, ...]]:
    """Bijections gold column i -> prediction column, each drawn from ``candidates[i]``."""
    chosen: list[int] = []
    used: set[int] = set()

    def walk(i: int) -> Iterator[tuple[int, ...]]:
        if i == len(candidates):
            yield tuple(chosen)
            return
        for j in candidates[i]:
            if j not in used:
                used.add(j)
                chosen.append(j)
                yield from walk(i + 1)
                chosen.pop()
                used.discard(j)

    return walk(0)


def results_match(gold: list[Row], pred: list[Row], order_matters: bool) -> bool:
    """test-suite-sql-eval's ``result_eq``: same rows up to a column permutation.

    Rows compare as a multiset, or as a sequence when ``order_matters``. Values
    compare with Python equality (so ``1 == 1.0``; strings exactly). A column
    permutation is only tried if every value of each prediction column occurs
    in the gold column it would stand for (upstream samples 20 rows for this
    pruning; all rows are used here, which prunes only impossible permutations).
    After ``MAX_PERMUTATIONS`` candidates without a match the tables count as different.

    Args:
        gold: The gold result.
        pred: The predicted result.
        order_matters: Compare row order too.

    Returns:
        True iff some column permutation makes the tables equal.
    """
    if not gold and not pred:
        return True
    if len(gold) != len(pred):
        return False
    width = len(gold[0])
    if any(len(row) != width for row in gold) or any(len(row) != width for row in pred):
        return False
    gold_columns = [{row[i] for row in gold} for i in range(width)]
    candidates = [
        [j for j in range(width) if all(row[j] in gold_columns[i] for row in pred)]
        for i in range(width)
    ]
    gold_bag = None if order_matters else Counter(gold)
    for tried, perm in enumerate(_column_permutations(candidates)):
        if tried >= MAX_PERMUTATIONS:
            return False
        permuted = (
            pred if perm == tuple(range(width)) else [tuple(row[j] for j in perm) for row in pred]
        )
        if permuted == gold if order_matters else Counter(permuted) == gold_bag:
            return True
    return False


# --- reading the answer -----------------------------------------------------------------------

_FENCE = re.compile(r"```[^\n`]*\n?(.*?)```", re.S)
_SQL_START = re.compile(r"(?:select|with)\b", re.I)


def strip_fences(text: str) -> str:
    """The first code fence's content if there is one, else the text; outer backticks removed."""
    m = _FENCE.search(text)
    text = (m.group(1) if m else text).strip()
    if len(text) >= 2 and text[0] == text[-1] == "`":
        text = text.strip("`").strip()
    return text


def extract_sql(text: str) -> str | None:
    """The answer as one SQL query, or ``None`` if it does not read as one.

    It reads as SQL if, after removing code fences and trailing ``;``, it starts
    with ``SELECT`` or ``WITH`` and is a complete statement.

    Example:
        >>> extract_sql("select count(*) from t;"), extract_sql("42"), extract_sql("SELECT 'open")
        ('select count(*) from t', None, None)
    """
    sql = strip_fences(text)
    while sql.endswith(";"):
        sql = sql[:-1].rstrip()
    if "\0" in sql or not _SQL_START.match(sql) or not sqlite3.complete_statement(sql + ";"):
        return None
    return sql


_NUMBER_TEXT = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
_NULLS = {"null", "none"}
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+(?=\S)")
_SEPARATOR_LINE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?\s*$")
_ROW_COUNT_LINE = re.compile(r"^\s*\(\d+ row\(s\)[^)]*\)\s*$")


def canonical(value: Any) -> Any:
    """A value as typed-answer comparison sees it: numbers by value, strings trimmed, null as None.

    Example:
        >>> canonical(3.0), canonical(" 3 "), canonical("NULL"), canonical(" Paris "), canonical(1/3)
        (3, 3, None, 'Paris', 0.333333333333)
    """
    if value is None or isinstance(value, bool):
        return None if value is None else int(value)
    if isinstance(value, bytes):
        value = value.decode(errors="ignore")
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in _NULLS:
            return None
        if not _NUMBER_TEXT.fullmatch(text):
            return text
        try:
            value = float(text) if any(c in text for c in ".eE") else int(text)
        except ValueError:  # more digits than int() converts
            return text
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        if value.is_integer() and abs(value) < 2**63:
            return int(value)
        return float(f"{value:.12g}")
    return str(value).strip()


_NO_LITERAL = object()
_SCALARS = (str, int, float, bool, type(None))


def _literal(text: str) -> Any:
    for parse in (json.loads, ast.literal_eval):
        try:
            return parse(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    return _NO_LITERAL


def _tables_from_literal(value: Any) -> list[list[Row]]:
    if isinstance(value, _SCALARS):
        return [[(value,)]]
    if isinstance(value, dict):
        return (
            [[tuple(value.values())]]
            if all(isinstance(v, _SCALARS) for v in value.values())
            else []
        )
    if not isinstance(value, (list, tuple)):
        return []
    if not value:
        return [[]]
    if all(isinstance(r, (list, tuple)) for r in value):
        return [[tuple(r) for r in value]]
    if all(isinstance(r, dict) for r in value):
        keys = list(value[0])
        if any(set(r) != set(keys) for r in value):
            return []
        return [[tuple(r[k] for k in keys) for r in value]]
    if all(isinstance(v, _SCALARS) for v in value):
        return [[(v,) for v in value], [tuple(value)]]
    return []


def _pipe_cells(line: str) -> Row:
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|"):
        line = line[:-1]
    return tuple(cell.strip() for cell in line.split("|"))


def _pipe_table(lines: list[str]) -> list[Row] | None:
    """Rows of a markdown or ``run_sql`` table; a header followed by a ``---`` line is dropped."""
    lines = [line for line in lines if not _ROW_COUNT_LINE.match(line)]
    if len(lines) >= 2 and _SEPARATOR_LINE.match(lines[1]):
        lines = lines[2:]
    elif not lines or not all("|" in line for line in lines if not _SEPARATOR_LINE.match(line)):
        return None
    return [_pipe_cells(line) for line in lines if not _SEPARATOR_LINE.match(line)]


def read_result_values(text: str) -> list[list[Row]]:
    """Every reading of a typed answer as a result table (an answer matches if any reading does).

    Readings, the first kind that applies: a JSON/Python literal (a list of
    rows, a list of values as one column or as one row, a scalar); else a pipe
    table (header and row-count lines dropped; a first line of no numbers and no
    ``---`` line under it is read both as a header and as a row); else the whole text as one
    value, comma/semicolon-separated values on one line as a column or as a
    row, one value per line (bullets removed), or lines of tab/comma-separated cells.

    Example:
        >>> read_result_values('[["a", 1]]')
        [[('a', 1)]]
        >>> read_result_values("a | n\\n--- | ---\\nx | 1\\n(1 row(s))")
        [[('x', '1')]]
        >>> read_result_values("x, y")
        [[('x, y',)], [('x',), ('y',)], [('x', 'y')]]
    """
    text = strip_fences(text)
    if not text:
        return []
    literal = _literal(text)
    if literal is not _NO_LITERAL and (readings := _tables_from_literal(literal)):
        return readings
    lines = [line for line in text.splitlines() if line.strip()]
    table = (
        _pipe_table(lines)
        if any("|" in line or _SEPARATOR_LINE.match(line) for line in lines)
        else None
    )
    if table is not None:
        if len(table) > 1 and not any(_NUMBER_TEXT.fullmatch(cell) for cell in table[0]):
            return [table, table[1:]]  # a header line without its "---" line: read with and without it
        return [table]
    readings = []
    if len(lines) == 1:
        readings.append([(text,)])
        parts = [p.strip() for p in re.split(r"[;,]", text)]
        if len(parts) > 1:
            readings += [[(p,) for p in parts], [tuple(parts)]]
    else:
        readings.append([(_BULLET.sub("", line).strip(),) for line in lines])
        for sep in ("\t", ","):
            if all(sep in line for line in lines):
                readings.append([tuple(c.strip() for c in line.split(sep)) for line in lines])
    return readings


# --- the scorer -------------------------------------------------------------------------------


def _database(context: VerifyContext, db: str | None) -> str | None:
    files = context.task_files
    if db is not None:
        return files.get(db)
    found = [path for name, path in files.items() if name.lower().endswith(SQLITE_SUFFIXES)]
    return found[0] if len(found) == 1 else None


def _rows(n: int) -> str:
    return f"{n} row{'s' if n != 1 else ''}"


@register("sql_execution")
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
    path = _database(context, db)
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
    want = [tuple(canonical(v) for v in row) for row in gold_rows]
    match = any(
        results_match(want, [tuple(canonical(v) for v in row) for row in reading], ordered)
        for reading in readings
    )
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
