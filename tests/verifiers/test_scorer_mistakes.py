"""Our own scorer mistakes (issue 32, item 5): each false positive and false negative found.

Every case is synthetic (no benchmark data) and goes through the registry
(``judge``), as the server reaches it, under the profile it is about. Each
false-negative fix is paired with the hedge it must not open.
"""

from __future__ import annotations

import doctest
import importlib
import sqlite3

import json5
import pyjson5
import pytest
from cpu_time import cpu_seconds

from analyst_env.task_format import VerifierSpec
from analyst_env.verifiers import VerifyContext, judge


def reward(name: str, answer: str, gold, profile: str = "strict", context=None, **params) -> float:
    return judge(VerifierSpec(name=name, params=params), answer, gold, context, profile).reward


EM = {"answer": "42", "metric": "EM"}


# ── TableBench: which "Final Answer:" counts ──
def test_tablebench_reads_the_first_final_answer_as_upstream_does():
    # Upstream: re.search(r"Final Answer: (.+)"), the first marker. We read the last one,
    # so a hedge whose last line was right paid under both profiles.
    hedge = "Final Answer: 41\nFinal Answer: 42"
    assert reward("tablebench", hedge, EM, "official") == 0.0
    assert reward("tablebench", "Final Answer: 42\nFinal Answer: 41", EM, "official") == 1.0


@pytest.mark.parametrize(
    "hedge",
    [
        "Final Answer: 42\nFinal Answer: 41",
        "Final Answer: 41\nFinal Answer: 42",
        "Final Answer: 42\nOn reflection,\nFinal Answer: 42, 41",
    ],
)
def test_tablebench_strict_pays_nothing_for_two_different_final_answers(hedge):
    assert reward("tablebench", hedge, EM) == 0.0


def test_tablebench_strict_takes_a_repeated_final_answer():
    assert reward("tablebench", "Final Answer: 42\nSo:\nFinal Answer: 42.0", EM) == 1.0
    assert reward("tablebench", "My final answer:\nFinal Answer: 42", EM) == 1.0


def test_tablebench_marker_case():
    # Upstream's regex is case-sensitive: "Final Answer: 42" is read, not a lower-case marker
    # before it; another case counts only when there is no "Final Answer:" at all.
    assert reward("tablebench", "FINAL ANSWER: 42", EM, "official") == 1.0
    # ... but for strict a differing answer after a marker in any case is still a hedge.
    assert reward("tablebench", "Final Answer: 42\nfinal answer: 41", EM) == 0.0


@pytest.mark.parametrize("profile", ["strict", "official"])
def test_tablebench_reads_only_the_answer_line(profile):
    # Upstream's (.+) stops at the line end; the explanation line is not part of the answer.
    answer = "Final Answer: 42\nThis is because the two rows add up to 42."
    assert reward("tablebench", answer, EM, profile) == 1.0
    gold = {"answer": "spain, france", "metric": "EM"}
    assert reward("tablebench", "Final Answer: Spain, France\nBoth in 1990.", gold, profile) == 1.0


def test_tablebench_chart_answer_may_span_lines():
    gold = {"answer": "y_references = [[1.0, 2.0], [3.0]]", "metric": "Pass@1"}
    answer = "Final Answer: y_references = [\n  [1, 2],\n  [3],\n]"
    assert reward("tablebench", answer, gold) == 1.0


# ── SI thousands separators ──
@pytest.mark.parametrize("space", [" ", "\u202f", "\u00a0", "\u2009"])
def test_si_thousands_groups_are_one_number(space):
    answer = f"231{space}233.50"
    assert reward("numeric", answer, 231233.5) == 1.0
    assert reward("numeric", f"The total is {answer} EUR.", 231233.5) == 1.0
    assert reward("tablebench", f"Final Answer: {answer}", {"answer": "231233.5", "metric": "EM"})
    assert reward("set", f"1{space}200; 3", ["1200", "3"]) == 1.0


@pytest.mark.parametrize("answer", ["231 233", "1 23 456", "12 345 6789", "231 233, 5"])
def test_si_groups_do_not_make_a_hedge_pay(answer):
    # Neither part, nor a number out of badly grouped digits, is the stated number.
    for gold in (231.0, 233.0, 123456.0, 6789.0, 5.0):
        assert reward("numeric", answer, gold) == 0.0


def test_tablebench_official_keeps_upstream_reading_of_si_groups():
    # Upstream's normalize_answer reads "231 233.50" as two tokens: no match. Official keeps it.
    gold = {"answer": "231233.5", "metric": "EM"}
    assert reward("tablebench", "Final Answer: 231 233.50", gold, "official") == 0.0


# ── a JSON list and a note ──
@pytest.mark.parametrize("scorer", ["set", "list"])
def test_json_list_followed_by_a_bracketed_note(scorer):
    gold = ["North", "East"]
    assert reward(scorer, '["North", "East"] [note: sorted by count]', gold) == 1.0
    assert reward(scorer, 'They are ["North", "East"] (by count) [see cell 4].', gold) == 1.0


@pytest.mark.parametrize(
    "answer",
    [
        '["North", "East"] ["North"]',
        '["North"] ["North", "East"]',
        "['North', 'East'] [x] ['North']",
        '["North", "East"] [or maybe "West"]',
        '["North", "East"] [it\'s] ["West"]',
        '["North", "East"] or maybe West',
        '["North", "East"] (or perhaps "West")',
        '["North", "East"] (West?)',
    ],
)
def test_a_second_list_or_a_hedging_note_is_refused(answer):
    for gold in (["North", "East"], ["North"]):
        assert reward("set", answer, gold) == 0.0


# ── Spider values form ──
@pytest.fixture(scope="module")
def town(tmp_path_factory):
    path = tmp_path_factory.mktemp("mistakes") / "town.sqlite"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE people (name TEXT, city TEXT, age INTEGER)")
        rows = [("Ann", "Oslo", 31), ("Bob", "Rome", 28), ("Cid", "Oslo", 45)]
        con.executemany("INSERT INTO people VALUES (?, ?, ?)", rows)
    con.close()
    return VerifyContext(task_files={"town.sqlite": str(path)})


@pytest.mark.parametrize("profile", ["strict", "official"])
def test_spider_values_compare_ignoring_case(town, profile):
    gold = "SELECT DISTINCT city FROM people"
    assert reward("sql_execution", '["oslo", "rome"]', gold, profile, town) == 1.0
    assert reward("sql_execution", "OSLO\nROME", gold, profile, town) == 1.0
    assert reward("sql_execution", '["oslo", "rome", "lima"]', gold, profile, town) == 0.0
    # A query's own result compares exactly, as upstream's execution match does.
    assert reward("sql_execution", "SELECT lower(city) FROM people", gold, profile, town) == 0.0


def test_spider_mean_rounded_to_two_decimals(town):
    gold = "SELECT avg(age) FROM people"  # 34.666...
    assert reward("sql_execution", "34.67", gold, context=town) == 1.0
    assert reward("sql_execution", "34.667", gold, context=town) == 1.0
    assert reward("sql_execution", "34.66", gold, context=town) == 0.0  # truncated, not rounded
    assert reward("sql_execution", "34.7", gold, context=town) == 0.0  # one decimal: too coarse
    assert reward("sql_execution", "35", gold, context=town) == 0.0
    assert reward("sql_execution", "34.67, 34.66", gold, context=town) == 0.0


def test_spider_rounded_values_in_a_table(town):
    gold = "SELECT city, avg(age) FROM people GROUP BY city"  # Oslo 38.0, Rome 28.0
    assert reward("sql_execution", '[["oslo", 38.00], ["rome", 28.00]]', gold, context=town) == 1.0
    gold = "SELECT name, age / 7.0 FROM people WHERE city = 'Oslo'"  # 4.428571, 6.428571
    answer = "Ann | 4.43\nCid | 6.43"
    assert reward("sql_execution", answer, gold, context=town) == 1.0
    assert reward("sql_execution", "Ann | 4.43\nCid | 6.42", gold, context=town) == 0.0


# ── DA-Code text answers in JSON5 ──
@pytest.mark.parametrize(
    "answer",
    [
        '{"Top Country": "Monaco", // the highest\n "Count": 3}',
        "{'Top Country': 'Monaco', 'Count': 3,}",
        '{/* both keys */ "Top Country": "Monaco", "Count": 3, }',
        'Answer:\n```json\n{\n  "Top Country": "Monaco",\n  "Count": 3, // rows\n}\n```',
        '{"Top Country": "Monaco", Count: +3}',
    ],
)
def test_dacode_text_reads_json5_as_upstream_does(answer):
    assert reward("dacode_text", answer, {"Top Country": "Monaco", "Count": 3}) == 1.0


def test_dacode_json5_does_not_read_two_objects():
    gold = {"n": 3}
    assert reward("dacode_text", '{"n": 2} // or\n{"n": 3}', gold) == 0.0
    assert reward("dacode_text", "{'n': 2,} {'n': 3,}", gold) == 0.0


@pytest.mark.parametrize(
    "text",
    [
        "{'a': 1, /* c */ b: [.5, 0x10, 5., +3,], // d\n 'q\\'s': \"x'y\\\"z\", c: -Infinity}",
        '{"a": "//not a comment", "b": "/* nor this */", "c": [1, 2,],}',
        "{a: 'line\\\ncontinued', b: null, c: true, d: 1e3, e: -.25}",
    ],
)
def test_json5_reading_agrees_with_the_json5_package(text):
    assert repr(pyjson5.loads(text)) == repr(json5.loads(text))


@pytest.mark.parametrize("text", ["{'a': 1", "{a: 'x}", "{/* open", "{'a': 1} {'b': 2}"])
def test_json5_reading_refuses_what_the_json5_package_refuses(text):
    with pytest.raises(ValueError):
        json5.loads(text)
    with pytest.raises(pyjson5.Json5Exception):
        pyjson5.loads(text)


# ── a number one unit of the last asked decimal off ──
def test_number_one_unit_off_the_asked_rounding_does_not_pay():
    params = {"decimals": 2, "exact": 3.14159}
    assert reward("numeric", "3.14", 3.14, **params) == 1.0
    assert reward("numeric", "3.1416", 3.14, **params) == 1.0
    assert reward("numeric", "3.15", 3.14, **params) == 0.0
    assert reward("numeric", "3.13", 3.14, **params) == 0.0


def test_number_at_a_tie_pays_both_roundings():
    params = {"decimals": 2, "exact": 1.005}  # half-up 1.01, Python's round 1.0
    assert reward("numeric", "1.01", 1.0, **params) == 1.0
    assert reward("numeric", "1.00", 1.0, **params) == 1.0
    assert reward("numeric", "1.02", 1.0, **params) == 0.0


def test_generated_number_tasks_ask_for_the_rounding_not_a_unit_of_slack():
    from analyst_env.datasets.procedural.draft import Draft, oracle_and_verifier

    draft = Draft("Mean?", 3.14, "number", "easy", decimals=2, exact=3.14159)
    oracle, gold, spec = oracle_and_verifier(draft)
    assert (oracle, gold) == ("3.14", 3.14)
    assert judge(spec, oracle, gold).reward == 1.0
    assert judge(spec, "3.15", gold).reward == 0.0


@pytest.mark.parametrize("module", ["tablebench", "dacode"])
def test_docstring_examples_of_the_fixed_modules(module):
    result = doctest.testmod(importlib.import_module(f"analyst_env.verifiers.{module}"))
    assert result.attempted > 0 and result.failed == 0


# ── the new readings stay cheap on the biggest answers the cap allows ──
CAP = 64 * 1024
NEW_NASTY = {
    "line comments": "{" + "//\n" * (CAP // 3 - 1) + "}",
    "open block comments": "{" + "/*" * (CAP // 2 - 1),
    "single quotes": "{" + "'" * (CAP - 2) + "}",
    "bare keys": "{" + "a:1," * (CAP // 4 - 1) + "}",
    "trailing commas": "{'a': [" + "1,," * (CAP // 3 - 4) + "]}",
    "notes": '["a"] ' + "[x] " * (CAP // 4 - 2),
    "lists": '["a"] ' * (CAP // 6),
    "open brackets after a list": '["a"] ' + "[" * (CAP - 8),
    "si groups": "1" + " 000" * (CAP // 4 - 1),
    "final answers": "Final Answer: 1\n" * (CAP // 16),
}


JSON5_SHAPES = ["line comments", "open block comments", "single quotes", "bare keys"]


@pytest.mark.parametrize(
    ("name", "gold", "shapes"),
    [
        ("dacode_text", {"a": [2]}, [*JSON5_SHAPES, "trailing commas"]),
        ("set", ["a", "b"], ["notes", "lists", "open brackets after a list"]),
        ("numeric", 1000.0, ["si groups"]),
        ("tablebench", {"answer": "12, x", "metric": "EM"}, ["final answers", "si groups"]),
    ],
)
def test_new_readings_handle_capped_nasty_answers_quickly(name, gold, shapes):
    for shape in shapes:
        answer = NEW_NASTY[shape]
        assert len(answer.encode()) <= CAP, shape
        # A guard against super-linear readings, not a speed goal: the readings take
        # 0.01-0.1 s on these answers; the quadratic ones this guards against took 1.2 s.
        verdict, took = cpu_seconds(judge, VerifierSpec(name=name), answer, gold)
        assert verdict.reward == 0.0, shape
        assert took < 1.0, f"{name} took too long on {shape}"
