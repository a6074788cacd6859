"""Read an SQL answer: one query, or the result values an agent pasted.

An analyst agent may answer in either of two forms:

* **A query**: one SQLite ``SELECT``/``WITH`` statement. A surrounding code
  fence and a trailing ``;`` are removed (:func:`extract_sql`).
* **The result values** (:func:`read_result_values`): a JSON (or Python) list of
  rows ``[["Alice", 31], ["Bob", 28]]``, a single value ``42``, a comma- or
  newline-separated list ``Alice, Bob`` for a one-column result, or the pipe
  table ``run_sql`` printed, pasted as is (with or without the ``---`` line).
  Values are normalized by :func:`canonical`: numbers by value (``3`` equals
  ``3.0``, ``1,204`` equals ``1204``, floats to 12 significant digits), strings trimmed,
  ``NULL`` is null.

Example:
    >>> extract_sql("```sql\\nSELECT 1;\\n```")
    'SELECT 1'
"""

from __future__ import annotations

import ast
import json
import math
import re
import sqlite3
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from analyst_env.verifiers.sql_compare import results_match
from analyst_env.verifiers.sql_readonly import Row

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
_THOUSANDS_TEXT = re.compile(r"[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_NULLS = {"null", "none"}
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+(?=\S)")
_SEPARATOR_LINE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?\s*$")
_ROW_COUNT_LINE = re.compile(r"^\s*\(\d+ row\(s\)[^)]*\)\s*$")


def canonical(value: Any) -> Any:
    """A value as typed-answer comparison sees it: numbers by value, strings trimmed, null as None.

    Example:
        >>> canonical(3.0), canonical(" 3 "), canonical("NULL"), canonical(" Paris ")
        (3, 3, None, 'Paris')
        >>> canonical("1,204"), canonical("1,204.5"), canonical("1,2")
        (1204, 1204.5, '1,2')
        >>> canonical(1 / 3)
        0.333333333333
    """
    if value is None or isinstance(value, bool):
        return None if value is None else int(value)
    if isinstance(value, bytes):
        value = value.decode(errors="ignore")
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in _NULLS:
            return None
        if _THOUSANDS_TEXT.fullmatch(text):  # "1,204": a count as people write it
            text = text.replace(",", "")
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


def _header_over_numbers(table: list[Row]) -> bool:
    """Whether a table's first line, with no ``---`` line under it, may be its header: no number
    in it, and some column of it text above numbers only (``name | age`` over ``Ann | 31``).

    A first line of text over text may as well be a row; read both ways, two candidate rows
    (``| Lima |`` over ``| Oslo |``) paid for either.
    """
    if len(table) < 2:
        return False
    first, rest = table[0], table[1:]
    if any(_NUMBER_TEXT.fullmatch(cell) for cell in first):
        return False
    return any(
        all(column < len(row) and _NUMBER_TEXT.fullmatch(row[column]) for row in rest)
        for column in range(len(first))
    )


def read_result_values(text: str) -> list[list[Row]]:
    """Every reading of a typed answer as a result table (an answer matches if any reading does).

    Readings, the first kind that applies: a JSON/Python literal (a list of
    rows, a list of values as one column or as one row, a scalar); else a pipe
    table (header and row-count lines dropped; a first line with no ``---`` line under it is
    read both as a header and as a row where it is text above a column of numbers); else the
    whole text as one value, comma/semicolon-separated values on one line as a column or as a
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
        if _THOUSANDS_TEXT.fullmatch(text):  # "1,204" is also the tuple (1, 204) to Python
            return [[(text,)], *readings]
        return readings
    lines = [line for line in text.splitlines() if line.strip()]
    table = (
        _pipe_table(lines)
        if any("|" in line or _SEPARATOR_LINE.match(line) for line in lines)
        else None
    )
    if table is not None:
        if _header_over_numbers(table):  # a header line without its "---" line: both readings
            return [table, table[1:]]
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


_TYPED_DECIMALS = re.compile(r"[-+]?\d*\.(\d+)")
MIN_ROUNDED_PLACES = 2
"""Typed numbers with at least this many decimals may be the gold rounded to them."""


def _typed(value: Any) -> Any:
    """A typed or gold value as the values form compares it: :func:`canonical`, text case-folded."""
    value = canonical(value)
    return value.casefold() if isinstance(value, str) else value


def _typed_places(reading: list[Row]) -> int | None:
    """The most decimals a typed number of the reading shows, if at least ``MIN_ROUNDED_PLACES``."""
    places = 0
    for row in reading:
        for cell in row:
            if isinstance(cell, float):
                cell = repr(cell)
            if isinstance(cell, str) and (m := _TYPED_DECIMALS.fullmatch(cell.strip())):
                places = max(places, len(m.group(1)))
    return places if places >= MIN_ROUNDED_PLACES else None


def _rounded(value: Any, places: int, half_up: bool) -> Any:
    if not isinstance(value, float):
        return value
    if half_up:  # as a person rounds the printed value: 2.675 -> 2.68
        return canonical(
            float(Decimal(repr(value)).quantize(Decimal(1).scaleb(-places), ROUND_HALF_UP))
        )
    return canonical(round(value, places))  # as Python rounds the binary value: 2.675 -> 2.67


def values_match(gold: list[Row], reading: list[Row], order_matters: bool) -> bool:
    """Whether a reading of a typed values answer is the gold result.

    Values compare as :func:`canonical` makes them, strings ignoring case (a
    typed ``paris`` is the value ``Paris``; how the agent wrote it, not which
    value it named). When the typed numbers show ``places`` >= 2 decimals, the
    gold's fractional numbers rounded to that many places match too (a mean
    typed as ``3.14`` for ``3.14159...``), rounded half-up or as Python rounds.
    The shape still counts: a reading with other rows or columns never matches.

    Example:
        >>> values_match([("Paris", 3.14159)], [("paris", "3.14")], False)
        True
        >>> values_match([("Paris", 3.14159)], [("paris", "3.1")], False)
        False
    """
    got = [tuple(_typed(v) for v in row) for row in reading]
    want = [tuple(_typed(v) for v in row) for row in gold]
    if results_match(want, got, order_matters):
        return True
    places = _typed_places(reading)
    if places is None:
        return False
    return any(
        results_match(
            [tuple(_rounded(v, places, half_up) for v in row) for row in want], got, order_matters
        )
        for half_up in (False, True)
    )
