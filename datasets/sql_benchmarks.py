"""What the Spider and KaggleDBQA loaders share: one SQLite text-to-SQL question as a ``Task``.

Both benchmarks give a question, a ``db_id`` naming a SQLite database and a
gold query, scored by execution accuracy (the ``sql_execution`` verifier). The
task copies the database into the episode as ``<db_id>.sqlite`` and tells the
agent it may answer in either of two forms (``ANSWER_FORMAT``):

* a single SQLite query that returns the result, e.g.
  ``SELECT name, age FROM people WHERE age > 30 ORDER BY age``; or
* the result values, e.g. ``42``, ``["Alice", "Bob"]`` (one column),
  ``[["Alice", 31], ["Bob", 28]]`` (several columns), or the table ``run_sql`` printed.

The oracle runs the gold query with ``run_sql`` and submits it. A gold query
that does not run on its database keeps its task, marked in
``metadata["gold_status"]`` (``"ok"`` or ``"error: ..."``), so it can be
listed and investigated instead of silently vanishing.

Example:
    >>> print(ANSWER_FORMAT.splitlines()[0])
    Answer with a single SQLite query that returns the result, or with the result values:
    >>> spider_hardness({"select": [False, [[0, [0, [0, 1, False], None]]]], "from": {"table_units":
    ...     [["table_unit", 0]], "conds": []}, "where": [], "groupBy": [], "having": [],
    ...     "orderBy": [],
    ...     "limit": None, "intersect": None, "union": None, "except": None})
    'easy'
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from analyst_env.task_format import Task, ToolCall, VerifierSpec

ANSWER_FORMAT = (
    "Answer with a single SQLite query that returns the result, or with the result values:\n"
    "- A query: submit only the query, for example "
    "`SELECT name, age FROM people WHERE age > 30 ORDER BY age`. It is run against the original "
    "database and its result compared with the correct result (a ```sql code fence and a "
    "trailing `;` are fine).\n"
    '- The result values: for example `42` for a single value, `["Alice", "Bob"]` or one '
    'value per line for a single column, `[["Alice", 31], ["Bob", 28]]` for several '
    "columns, or the table that `run_sql` printed, pasted as is.\n"
    "Columns may come in any order; row order counts only when the question asks for a sorted "
    "result."
)


def build_instruction(question: str, db_file: str, notes: str = "") -> str:
    """The agent-facing instruction: the question, where the database is, how to answer.

    Args:
        question: The benchmark question.
        db_file: The database's file name in the working directory.
        notes: Optional documentation of the database (shown before the answer format).

    Example:
        >>> print(build_instruction("How many singers?", "concert_singer.sqlite").splitlines()[2])
        The SQLite database `concert_singer.sqlite` is in your working directory.
    """
    parts = [question.strip(), f"The SQLite database `{db_file}` is in your working directory."]
    if notes.strip():
        parts.append(notes.strip())
    parts.append(ANSWER_FORMAT)
    return "\n\n".join(parts)


@functools.lru_cache(maxsize=4096)
def _gold_status(db_path: str, mtime_ns: int, sql: str) -> str:
    from analyst_env.verifiers.sql_execution import SqlRunError, official_preprocess, run_readonly

    try:
        run_readonly(db_path, sql)
        if (rewritten := official_preprocess(sql)) != sql:
            run_readonly(db_path, rewritten)
    except SqlRunError as exc:
        return f"error: {exc}"
    return "ok"


def gold_status(db_path: str | os.PathLike[str], sql: str) -> str:
    """``"ok"`` if the gold query runs on its database as written and as the scorer rewrites it.

    Returns:
        ``"ok"``, or ``"error: <reason>"`` (also when the database file is missing).
    """
    path = str(db_path)
    if not os.path.isfile(path):
        return f"error: database file {path} not found"
    if not sql.strip():
        return "error: empty gold query"
    return _gold_status(path, os.stat(path).st_mtime_ns, sql)


def sql_task(
    *,
    task_id: str,
    question: str,
    gold_sql: str,
    db_id: str,
    db_path: Path,
    split: str,
    source: str,
    parsed_sql: Any = None,
    notes: str = "",
) -> Task:
    """One text-to-SQL question as a task scored by execution accuracy.

    Args:
        task_id: Unique id.
        question: The question text.
        gold_sql: The gold query (the answer; never shown).
        db_id: The benchmark's database id; the file is served as ``<db_id>.sqlite``.
        db_path: Host path of the database.
        split: Split name.
        source: Benchmark name for the metadata.
        parsed_sql: The record's parsed ``sql`` dict, for the difficulty label.
        notes: Database documentation for the instruction.

    Returns:
        The task; ``metadata["gold_status"]`` says whether the gold query runs.
    """
    db_file = f"{db_id}.sqlite"
    metadata: dict[str, Any] = {"source": source, "db_id": db_id, "kind": "sqlite"}
    difficulty = spider_hardness(parsed_sql) if parsed_sql is not None else None
    if difficulty is not None:
        metadata["difficulty"] = difficulty
    metadata["gold_status"] = gold_status(db_path, gold_sql)
    return Task(
        id=task_id,
        instruction=build_instruction(question, db_file, notes),
        files={db_file: str(db_path)},
        answer=gold_sql,
        oracle_answer=gold_sql,
        oracle_steps=[ToolCall(tool="run_sql", arguments={"query": gold_sql})],
        verifier=VerifierSpec(name="sql_execution", params={"db": db_file}),
        split=split,
        metadata=metadata,
    )


# --- Spider's difficulty levels ----------------------------------------------------------------
# The official evaluator (evaluation.py, Evaluator.eval_hardness) labels a gold query easy,
# medium, hard or extra by counting parts of its parsed form; the records carry that parsed
# form in "sql", so the label costs nothing. The counts follow upstream, quirks included
# (it counts "aggregates" in WHERE and HAVING by their first field).

_LIKE_OP = 9  # index of 'like' in upstream's WHERE_OPS


def _units(sql: dict[str, Any]) -> list[Any]:
    """Condition units of FROM, WHERE and HAVING (each list alternates unit, 'and'/'or', unit)."""
    return sql["from"]["conds"][::2] + sql["where"][::2] + sql["having"][::2]


def _connectives(sql: dict[str, Any]) -> list[Any]:
    return sql["from"]["conds"][1::2] + sql["where"][1::2] + sql["having"][1::2]


def _count_component1(sql: dict[str, Any]) -> int:
    count = sum(bool(sql[k]) for k in ("where", "groupBy", "orderBy")) + (sql["limit"] is not None)
    count += max(len(sql["from"]["table_units"]) - 1, 0)
    count += sum(1 for token in _connectives(sql) if token == "or")
    count += sum(1 for unit in _units(sql) if unit[1] == _LIKE_OP)
    return count


def _count_component2(sql: dict[str, Any]) -> int:
    nested = sum(isinstance(v, dict) for unit in _units(sql) for v in (unit[3], unit[4]))
    return nested + sum(sql[k] is not None for k in ("intersect", "except", "union"))


def _count_agg(units: list[Any]) -> int:
    return sum(1 for unit in units if unit[0] != 0)


def _count_others(sql: dict[str, Any]) -> int:
    agg = _count_agg(sql["select"][1]) + _count_agg(sql["where"][::2]) + _count_agg(sql["groupBy"])
    if sql["orderBy"]:
        units = sql["orderBy"][1]
        agg += _count_agg([u[1] for u in units if u[1]] + [u[2] for u in units if u[2]])
    agg += _count_agg(sql["having"])
    return (
        (agg > 1)
        + (len(sql["select"][1]) > 1)
        + (len(sql["where"]) > 1)
        + (len(sql["groupBy"]) > 1)
    )


def spider_hardness(sql: Any) -> str | None:
    """Spider's difficulty (easy/medium/hard/extra) of a parsed gold query; None if malformed."""
    try:
        c1, c2, others = _count_component1(sql), _count_component2(sql), _count_others(sql)
    except (KeyError, IndexError, TypeError):
        return None
    if c1 <= 1 and others == 0 and c2 == 0:
        return "easy"
    if (others <= 2 and c1 <= 1 and c2 == 0) or (c1 <= 2 and others < 2 and c2 == 0):
        return "medium"
    if (
        (others > 2 and c1 <= 2 and c2 == 0)
        or (2 < c1 <= 3 and others <= 2 and c2 == 0)
        or (c1 <= 1 and others == 0 and c2 <= 1)
    ):
        return "hard"
    return "extra"
