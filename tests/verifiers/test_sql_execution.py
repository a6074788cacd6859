"""The ``sql_execution`` scorer: execution accuracy the way test-suite-sql-eval computes it.

Every test runs real SQLite against a small database built here; the scorer is
reached through the registry (``judge``), as the server reaches it.
"""

from __future__ import annotations

import doctest
import hashlib
import json
import sqlite3
import time

import pytest

import analyst_env.verifiers.sql_execution as sql_execution_module
from analyst_env.server.rendering import render_table
from analyst_env.task_format import VerifierSpec
from analyst_env.verifiers import VerifyContext, judge
from analyst_env.verifiers.sql_execution import SqlRunError, run_readonly

PEOPLE = [
    (1, "Ann", 31, "Oslo"),
    (2, "Bob", 28, "Rome"),
    (3, "Cid", 45, "Oslo"),
    (4, "Dee", 28, "Lima"),
]
GOLD_SORTED = "SELECT name, age FROM people ORDER BY age DESC, name"
GOLD_UNSORTED = "SELECT name, city FROM people WHERE age < 40"
GOLD_COUNT = "SELECT count(*) FROM people WHERE city = 'Oslo'"
GOLD_AVG = "SELECT avg(age) FROM people"
GOLD_DISTINCT = "SELECT DISTINCT city FROM people"


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("sqlexec") / "town.sqlite"
    with sqlite3.connect(path) as con:
        con.execute(
            "CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT, age INTEGER, city TEXT)"
        )
        con.executemany("INSERT INTO people VALUES (?, ?, ?, ?)", PEOPLE)
    con.close()
    return path


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def grade(db, answer: str, gold: str, **params):
    context = VerifyContext(task_files={"town.sqlite": str(db)})
    return judge(
        VerifierSpec(name="sql_execution", params={"db": "town.sqlite", **params}),
        answer,
        gold,
        context,
    )


def test_module_doctests():
    assert doctest.testmod(sql_execution_module).failed == 0


@pytest.mark.parametrize("gold", [GOLD_SORTED, GOLD_UNSORTED, GOLD_COUNT, GOLD_AVG, GOLD_DISTINCT])
def test_gold_itself_scores_one(db, gold):
    verdict = grade(db, gold, gold)
    assert verdict.reward == 1.0
    assert verdict.components == {"executes": 1.0, "result_match": 1.0}


def test_equivalent_but_different_sql_scores_one(db):
    other = "select p.name, p.city from people as p where not (p.age >= 40);"
    assert grade(db, other, GOLD_UNSORTED).reward == 1.0
    assert (
        grade(db, "SELECT COUNT(id) FROM people WHERE city IN ('Oslo')", GOLD_COUNT).reward == 1.0
    )


def test_column_permuted_select_scores_one(db):
    assert grade(db, "SELECT city, name FROM people WHERE age < 40", GOLD_UNSORTED).reward == 1.0
    assert (
        grade(db, "SELECT age, name FROM people ORDER BY age DESC, name", GOLD_SORTED).reward == 1.0
    )


def test_wrong_sql_scores_zero(db):
    verdict = grade(db, "SELECT name, city FROM people WHERE age < 30", GOLD_UNSORTED)
    assert verdict.reward == 0.0
    assert verdict.components == {"executes": 1.0, "result_match": 0.0}
    assert "differ" in verdict.detail
    # an extra column is a different table
    assert (
        grade(db, "SELECT name, city, age FROM people WHERE age < 40", GOLD_UNSORTED).reward == 0.0
    )


def test_sql_that_fails_scores_zero_with_the_reason(db):
    verdict = grade(db, "SELECT nope FROM people", GOLD_UNSORTED)
    assert verdict.reward == 0.0
    assert verdict.components["executes"] == 0.0
    assert "no such column" in verdict.detail


def test_row_order_counts_only_when_gold_has_order_by(db):
    reversed_order = "SELECT name, age FROM people ORDER BY age ASC, name DESC"
    assert grade(db, reversed_order, GOLD_SORTED).reward == 0.0
    assert "row order checked" in grade(db, reversed_order, GOLD_SORTED).detail
    # the gold has no ORDER BY: any order of the same rows is right
    assert grade(db, GOLD_UNSORTED + " ORDER BY name DESC", GOLD_UNSORTED).reward == 1.0


def test_order_rule_official_vs_top_level(db):
    gold = "SELECT name FROM people WHERE age = (SELECT age FROM people ORDER BY age LIMIT 1)"
    pred = "SELECT name FROM people WHERE age = 28 ORDER BY name DESC"
    # upstream's test is the substring 'order by', so a subquery's ORDER BY makes order count
    assert grade(db, pred, gold).reward == 0.0
    assert grade(db, pred, gold, order_rule="top_level").reward == 1.0


def test_distinct_is_removed_only_under_the_official_profile(db):
    assert (
        grade(db, "SELECT city FROM people", GOLD_DISTINCT, profile="official").reward == 1.0
    )  # upstream
    assert (
        grade(db, "SELECT city FROM people", GOLD_DISTINCT).reward == 0.0
    )  # strict: duplicates are wrong
    assert grade(db, "SELECT city FROM people", GOLD_DISTINCT, keep_distinct=True).reward == 0.0
    assert grade(db, "SELECT city FROM people", GOLD_DISTINCT, keep_distinct=False).reward == 1.0
    assert grade(db, GOLD_DISTINCT, GOLD_DISTINCT).reward == 1.0


def test_multiset_semantics_count_duplicates(db):
    gold = "SELECT age FROM people"
    assert grade(db, "SELECT DISTINCT age FROM people", gold, keep_distinct=True).reward == 0.0
    assert grade(db, "[31, 28, 45, 28]", gold).reward == 1.0
    assert grade(db, "[31, 28, 45]", gold).reward == 0.0


def test_code_fenced_sql_is_read(db):
    assert grade(db, f"```sql\n{GOLD_UNSORTED};\n```", GOLD_UNSORTED).reward == 1.0


@pytest.mark.parametrize(
    ("answer", "gold"),
    [
        ('[["Ann", "Oslo"], ["Bob", "Rome"], ["Dee", "Lima"]]', GOLD_UNSORTED),
        (
            '[{"name": "Ann", "city": "Oslo"}, {"name": "Dee", "city": "Lima"}, {"city": '
            '"Rome", "name": "Bob"}]',
            GOLD_UNSORTED,
        ),
        ("[('Oslo', 'Ann'), ('Rome', 'Bob'), ('Lima', 'Dee')]", GOLD_UNSORTED),
        ("2", GOLD_COUNT),
        ("2.0", GOLD_COUNT),
        ("33", GOLD_AVG),
        ("Oslo, Rome, Lima", GOLD_DISTINCT),
        ("Lima\nOslo\nRome", GOLD_DISTINCT),
        ("- Lima\n- Oslo\n- Rome", GOLD_DISTINCT),
        ('["Oslo", "Rome", "Lima"]', GOLD_DISTINCT),
        ("Cid, 45\nAnn, 31\nBob, 28\nDee, 28", GOLD_SORTED),
        (
            "| name | age |\n|---|---|\n| Cid | 45 |\n| Ann | 31 |\n| Bob | 28 |\n| Dee | 28 |",
            GOLD_SORTED,
        ),
    ],
)
def test_result_values_score_one(db, answer, gold):
    verdict = grade(db, answer, gold)
    assert verdict.reward == 1.0, verdict.detail
    assert verdict.components == {"values_parsed": 1.0, "result_match": 1.0}


def test_pasted_run_sql_table_scores_one(db):
    for gold in (GOLD_SORTED, GOLD_UNSORTED, GOLD_COUNT, GOLD_AVG):
        con = sqlite3.connect(db)
        cur = con.execute(gold)
        columns = [d[0] for d in cur.description]
        rows = [list(r) for r in cur.fetchall()]
        con.close()
        pasted = render_table(columns, rows, truncated=False, limit=20_000)
        assert grade(db, pasted, gold).reward == 1.0, pasted


def test_result_values_that_differ_score_zero(db):
    assert grade(db, "3", GOLD_COUNT).reward == 0.0
    assert grade(db, "Oslo, Rome", GOLD_DISTINCT).reward == 0.0
    assert grade(db, "Dee, 28\nBob, 28\nAnn, 31\nCid, 45", GOLD_SORTED).reward == 0.0  # wrong order
    assert (
        grade(db, '[["Ann", "Oslo"], ["Bob", "Rome"], ["Dee", "Lyon"]]', GOLD_UNSORTED).reward
        == 0.0
    )  # another value (case alone is no difference in typed values: test_scorer_mistakes.py)


def test_float_results_compare_by_value(db):
    gold = "SELECT avg(age) FROM people WHERE city != 'Oslo'"  # 28.0
    assert grade(db, "28", gold).reward == 1.0
    gold = "SELECT 1.0 / 3"
    assert grade(db, str(1 / 3), gold).reward == 1.0
    assert grade(db, "0.34", gold).reward == 0.0  # "0.33", the value rounded, pays
    assert grade(db, "0.3", gold).reward == 0.0  # one decimal is too few to be a rounding


def test_a_number_written_with_thousands_separators_is_that_number(db):
    assert grade(db, "1,204", "SELECT 1204").reward == 1.0
    assert grade(db, "1,204.5", "SELECT 1204.5").reward == 1.0
    assert grade(db, "Ann | 1,204", "SELECT 'Ann', 1204").reward == 1.0
    assert grade(db, "1,205", "SELECT 1204").reward == 0.0
    assert grade(db, "12,04", "SELECT 1204").reward == 0.0
    assert grade(db, "1,204", "SELECT 1, 204").reward == 1.0  # as before: the tuple (1, 204)


@pytest.mark.parametrize("answer", ["", "   ", "\n"])
def test_empty_answer_scores_zero(db, answer):
    verdict = grade(db, answer, GOLD_COUNT)
    assert verdict.reward == 0.0
    assert "empty" in verdict.detail or "no answer" in verdict.detail


def test_empty_gold_result_needs_an_empty_table(db):
    gold = "SELECT name FROM people WHERE age > 100"
    assert grade(db, "SELECT name FROM people WHERE city = 'Paris'", gold).reward == 1.0
    assert grade(db, "[]", gold).reward == 1.0
    assert grade(db, "", gold).reward == 0.0
    assert grade(db, "Ann", gold).reward == 0.0


@pytest.mark.parametrize(
    "attack",
    [
        "WITH x AS (SELECT 1) DELETE FROM people",
        "WITH x AS (SELECT 1) UPDATE people SET age = 0",
        "WITH x AS (SELECT 1) INSERT INTO people VALUES (9, 'Eve', 1, 'X')",
        "SELECT 1; DELETE FROM people",
        "SELECT * FROM pragma_table_info('people')",
        "SELECT load_extension('/tmp/evil')",
        "SELECT randomblob(200000000)",
        "DELETE FROM people",
        "DROP TABLE people",
        "ATTACH DATABASE '/tmp/evil.sqlite' AS evil",
        "PRAGMA writable_schema = ON",
        "VACUUM INTO '/tmp/copy.sqlite'",
    ],
)
def test_writes_and_escapes_score_zero_and_leave_the_db_unchanged(db, attack):
    before = digest(db)
    verdict = grade(db, attack, GOLD_COUNT)
    assert verdict.reward == 0.0
    assert verdict.detail
    assert digest(db) == before


def test_attach_pragma_and_second_statements_are_refused(db, tmp_path):
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).close()
    with pytest.raises(SqlRunError, match="not authorized"):
        run_readonly(str(db), f"ATTACH '{other}' AS o")
    with pytest.raises(SqlRunError, match="not authorized"):
        run_readonly(str(db), "PRAGMA user_version = 7")
    with pytest.raises(SqlRunError, match="one statement"):
        run_readonly(str(db), f"SELECT 1; ATTACH '{other}' AS o")


def test_a_query_that_runs_forever_is_stopped(db):
    forever = (
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n"
    )
    before = digest(db)
    start = time.monotonic()
    verdict = grade(db, forever, GOLD_COUNT, timeout_s=0.5)
    elapsed = time.monotonic() - start
    assert verdict.reward == 0.0
    assert "time limit" in verdict.detail
    assert elapsed < 5
    assert digest(db) == before


def test_endless_rows_hit_the_row_limit(db):
    endless = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT i FROM n"
    verdict = grade(db, endless, GOLD_COUNT, max_rows=5000)
    assert verdict.reward == 0.0
    assert "more than 5000 rows" in verdict.detail


def test_sql_looking_value_falls_back_to_values(db, tmp_path):
    path = tmp_path / "words.sqlite"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE t (w TEXT)")
        con.execute("INSERT INTO t VALUES ('With Honors')")
    con.close()
    context = VerifyContext(task_files={"words.sqlite": str(path)})
    verdict = judge(VerifierSpec(name="sql_execution"), "With Honors", "SELECT w FROM t", context)
    assert verdict.reward == 1.0, verdict.detail


def test_broken_gold_and_missing_database_score_zero_with_a_reason(db):
    verdict = grade(db, "SELECT 1", "SELECT nope FROM people")
    assert verdict.reward == 0.0 and "gold query failed" in verdict.detail
    context = VerifyContext(task_files={})
    verdict = judge(VerifierSpec(name="sql_execution"), "SELECT 1", GOLD_COUNT, context)
    assert verdict.reward == 0.0 and "no database" in verdict.detail
    verdict = judge(VerifierSpec(name="sql_execution"), "SELECT 1", None, context)
    assert verdict.reward == 0.0 and "no gold" in verdict.detail


def test_run_readonly_returns_rows_and_decodes_text(db):
    assert run_readonly(str(db), "SELECT name FROM people WHERE id = 1") == [("Ann",)]
    assert run_readonly(str(db), "SELECT CAST(x'41ff42' AS TEXT)") == [("AB",)]


def test_json_answer_of_the_gold_rows_matches_for_every_query(db):
    for gold in (GOLD_SORTED, GOLD_UNSORTED, GOLD_COUNT, GOLD_AVG, GOLD_DISTINCT):
        rows = run_readonly(str(db), gold)
        assert grade(db, json.dumps(rows), gold).reward == 1.0


@pytest.mark.parametrize(
    "junk",
    ["9" * 5000, "SELECT 1\x00", "[" * 5000, "1e999", "```", "| | |\n---\n", "{'a': [1, {2: 3}]}"],
)
def test_junk_answers_score_zero_without_raising(db, junk):
    verdict = grade(db, junk, GOLD_COUNT)
    assert verdict.reward == 0.0 and verdict.detail


def test_wide_tables_with_repeated_values_are_compared(db):
    gold = "SELECT " + ", ".join(["1"] * 8) + ", 2"
    assert grade(db, "SELECT 2, " + ", ".join(["1"] * 8), gold).reward == 1.0
    assert grade(db, "SELECT " + ", ".join(["1"] * 9), gold).reward == 0.0
