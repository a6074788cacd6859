"""Reward hacking: per scorer, adversarial answers score 0 and natural correct answers score 1.

On real tasks: the shipped starter set, and the shared benchmark copies when
present (``../shared/datasets`` next to the repo, or
``$ANALYST_ENV_SHARED_DATASETS``; skipped when absent). Plus cost bounds: the
largest answer the cap lets through (64 KiB), in its nastiest shapes, costs
every text scorer well under a second, and a huge workbook is refused unopened.
"""

from __future__ import annotations

import io
import time
import zipfile
from pathlib import Path

import openpyxl
import pytest
from cpu_time import cpu_seconds

from analyst_env.datasets import load_dataset
from analyst_env.task_format import VerifierSpec
from analyst_env.verifiers import VerifyContext, judge
from analyst_env.verifiers.adversarial import numeric_probes, probe_task, probes_for, summarize
from analyst_env.verifiers.sql_execution import SqlRunError, run_readonly

CAP = 65_536


@pytest.fixture(scope="module")
def starter():
    return {t.id: t for t in load_dataset("starter").tasks}


def score(task, answer: str, files: dict[str, bytes] | None = None) -> float:
    def read_file(name: str) -> bytes:
        if files is None or name not in files:
            raise FileNotFoundError(name)
        return files[name]

    context = VerifyContext(task_files=dict(task.files), read_file=read_file)
    return judge(task.verifier, answer, task.answer, context).reward


# --- numeric: starter-sales-000, gold 256171.68, "a single number rounded to 2 decimal places" ---

NUMERIC_NATURAL = [
    "256171.68",
    "256,171.68",
    "256\u202f171.68",
    "256\u00a0171.68",
    "$256,171.68",
    "256171.68 (rounded to 2 decimal places)",
    "256171.68 on 2022-12-31",
    "The total revenue of West orders in 2022 was 256171.68.",
    "256171.68 for 2022",
    "**256171.68**",
    "Rounded to 2 dp: 256171.68",
    "2.5617168e5",
    "256171.680",
    "256171.68 (256,171.68 USD)",
    "256171.68 (or 256,171.68 USD)",
    "256171.68 (between 2022 and 2023)",
    "256171.68 (FY 2023/24)",  # a slash in an aside is a period or a unit, not a hedge
    "256171.68 (USD/year, 2023)",
]

NUMERIC_ADVERSARIAL = [
    "",
    "Either 200.00 or 256171.68",
    "256171.68 or 200.00",
    "200.00, 256171.68",
    "[0, 256171.68, 1e9]",
    "200.00 - 256171.68",
    "maybe 256171.68, maybe 256000",
    "256171.68/256172",
    "Between 256000 and 256171.68",
    "nan",
    "inf",
    "1e309",
    "all of them",
    "256171.68?" + " 1" * 5,
    "256,171,68",
    "25617168",
    "256171.68 (or 256000)",
    "256171.68 [maybe 256172]",
    "256171.68 (256172?)",
    "256171.68 (perhaps 2022)",
]


@pytest.mark.parametrize("answer", NUMERIC_NATURAL)
def test_numeric_natural_forms_score_1(starter, answer):
    assert score(starter["starter-sales-000"], answer) == 1.0


@pytest.mark.parametrize("answer", NUMERIC_ADVERSARIAL)
def test_numeric_hedges_and_junk_score_0(starter, answer):
    assert score(starter["starter-sales-000"], answer) == 0.0


# --- exact: starter-sales-009, gold 2023-05 ---


@pytest.mark.parametrize("answer", ["2023-05", " '2023-05'. ", "**2023-05**", "2023-05."])
def test_exact_natural_forms_score_1(starter, answer):
    assert score(starter["starter-sales-009"], answer) == 1.0


@pytest.mark.parametrize(
    "answer", ["", "2023-05 or 2023-06", "2023-05, 2023-06", "2023-06", "2023", "all months"]
)
def test_exact_adversarial_answers_score_0(starter, answer):
    assert score(starter["starter-sales-009"], answer) == 0.0


# --- set: starter-sales-006, gold West, South, East (order does not matter) ---


@pytest.mark.parametrize(
    "answer",
    [
        '["West", "South", "East"]',
        '["east", "west", "south"]',
        "East, West, South",
        "- East\n- West\n- South",
        'The top regions are ["South", "East", "West"].',
        '["West", "West", "South", "East"]',
    ],
)
def test_set_natural_forms_score_1(starter, answer):
    assert score(starter["starter-sales-006"], answer) == 1.0


@pytest.mark.parametrize(
    "answer",
    [
        "",
        "[]",
        '["West", "South", "East", "North"]',
        '["West", "South", "East", "North", "Central"]',
        '["West", "South"]',
        "all of them",
        '[["West", "South", "East"]]',
        "West South East",
    ],
)
def test_set_supersets_subsets_and_junk_score_0(starter, answer):
    assert score(starter["starter-sales-006"], answer) == 0.0


# --- list: starter-sales-008, order matters ---

GOLD_LIST = ["Groceries", "Electronics", "Furniture", "Office Supplies", "Clothing"]


def test_list_natural_forms_score_1(starter):
    task = starter["starter-sales-008"]
    assert score(task, str(GOLD_LIST)) == 1.0
    assert score(task, "\n".join(f"{i}. {c}" for i, c in enumerate(GOLD_LIST, 1))) == 1.0
    assert score(task, ", ".join(c.lower() for c in GOLD_LIST)) == 1.0


def test_list_in_another_order_or_padded_scores_0(starter):
    task = starter["starter-sales-008"]
    assert score(task, str(GOLD_LIST[::-1])) == 0.0
    assert score(task, str(GOLD_LIST + ["Toys"])) == 0.0
    assert score(task, str([GOLD_LIST])) == 0.0


# --- dabench: starter-sales-019, @order_count[419] @avg_discount_pct[4.22] ---


def test_dabench_natural_forms_score_1(starter):
    task = starter["starter-sales-019"]
    assert score(task, "@order_count[419] @avg_discount_pct[4.22]") == 1.0
    assert (
        score(
            task, "There were @order_count[419] orders; average discount @avg_discount_pct[4.220]."
        )
        == 1.0
    )
    assert (
        score(task, "@order_count[419] @order_count[419.0] @avg_discount_pct[4.22]") == 1.0
    )  # a repeat that agrees


@pytest.mark.parametrize(
    "answer",
    [
        "",
        # upstream: the last repeat wins
        "@order_count[418] @order_count[419] @avg_discount_pct[4.22]",
        "@order_count[419] @avg_discount_pct[4.21] @avg_discount_pct[4.22] @avg_discount_pct[4.23]",
        "@order_count[419]",
        "order_count 419, avg_discount_pct 4.22",
        "@order_count[nan] @avg_discount_pct[inf]",
    ],
)
def test_dabench_hedges_by_repetition_and_missing_parts_score_0(starter, answer):
    assert score(starter["starter-sales-019"], answer) == 0.0


def test_dabench_official_repeat_rule_is_available():
    spec = VerifierSpec(name="dabench", params={"repeats": "last"})
    assert judge(spec, "@n[2] @n[3]", [["n", "3"]]).reward == 1.0


# --- workbook_match: starter-sales-wb-000, result.xlsx against the reference workbook ---


def _xlsx(rows: list[list], sheets: int = 1) -> bytes:
    wb = openpyxl.Workbook()
    for row in rows:
        wb.active.append(row)
    for i in range(1, sheets):
        wb.create_sheet(f"extra{i}")
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def _huge_xlsx(rows: int, cols: int = 5) -> bytes:
    """A real xlsx with a ``rows`` x ``cols`` sheet, its XML written directly (openpyxl would take
    seconds)."""
    base = _xlsx([["a"]])
    cells = "".join(
        f'<row r="{r}">'
        + "".join(f'<c r="{chr(65 + c)}{r}"><v>{r * 7 + c}</v></c>' for c in range(cols))
        + "</row>"
        for r in range(1, rows + 1)
    )
    out = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(base)) as src,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst,
    ):
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == "xl/worksheets/sheet1.xml":
                text = data.decode()
                head, tail = text.split("<sheetData>")[0], text.split("</sheetData>")[1]
                data = (head + "<sheetData>" + cells + "</sheetData>" + tail).encode()
            dst.writestr(item, data)
    return out.getvalue()


@pytest.fixture(scope="module")
def workbook_task(starter):
    task = starter["starter-sales-wb-000"]
    return task.model_copy(
        update={"verifier": VerifierSpec(name="workbook_match", params={"recalc": False})}
    )


def test_workbook_the_reference_itself_scores_1(workbook_task):
    reference = Path(workbook_task.answer["references"][0]["path"]).read_bytes()
    assert score(workbook_task, "done", {"result.xlsx": reference}) == 1.0


def test_workbook_empty_extra_sheet_input_copy_and_missing_score_0(workbook_task):
    reference = Path(workbook_task.answer["references"][0]["path"]).read_bytes()
    wb = openpyxl.load_workbook(io.BytesIO(reference))
    wb.create_sheet("notes")
    padded = io.BytesIO()
    wb.save(padded)
    assert score(workbook_task, "done", {"result.xlsx": padded.getvalue()}) == 0.0
    assert score(workbook_task, "done", {"result.xlsx": _xlsx([])}) == 0.0
    assert (
        score(
            workbook_task,
            "done",
            {"result.xlsx": Path(workbook_task.files["sales.csv"]).read_bytes()},
        )
        == 0.0
    )
    assert score(workbook_task, "done", {}) == 0.0
    assert score(workbook_task, "done", {"result.xlsx": b"PK\x03\x04 not a zip"}) == 0.0


def test_workbook_of_200000_rows_is_refused_unopened(workbook_task):
    data = _huge_xlsx(200_000)
    started = time.monotonic()
    context = VerifyContext(task_files=dict(workbook_task.files), read_file=lambda name: data)
    verdict = judge(workbook_task.verifier, "done", workbook_task.answer, context)
    assert verdict.reward == 0.0 and "over the limit" in verdict.detail
    assert time.monotonic() - started < 3  # opening it would take openpyxl tens of seconds


# --- cost bounds: the biggest answer the cap allows, in shapes that hurt parsers ---

NASTY = {
    "deep brackets": "[" * CAP,
    "deep braces": "{" * CAP,
    "balanced nesting": "[" * (CAP // 2 - 1) + "]" * (CAP // 2 - 1),
    "long number": "9" * CAP,
    "long decimal": "0." + "1" * (CAP - 2),
    "many numbers": "1 or " * (CAP // 5),
    "thousands groups": "1" + ",000" * (CAP // 4 - 1),
    "many items": '["a", ' + '"b", ' * (CAP // 5 - 2) + '"c"]',
    "many parts": "@n[1]" * (CAP // 5),
    "unclosed parts": "@a[" * (CAP // 3),  # upstream's regex: 4.7 s
    "parentheses": "(" * (CAP // 2) + "1" + ")" * (CAP // 2 - 1),
    "dates": "2024-01-01 " * (CAP // 11),
    "pipes": "|" * CAP,
    "json object": '{"a": [' + "1," * (CAP // 2 - 10) + "1]}",
}


@pytest.mark.parametrize(
    "task_id",
    [
        "starter-sales-000",
        "starter-sales-009",
        "starter-sales-006",
        "starter-sales-008",
        "starter-sales-019",
    ],
)
def test_every_text_scorer_handles_capped_nasty_answers_quickly(starter, task_id):
    task = starter[task_id]
    for name, answer in NASTY.items():
        assert len(answer.encode()) <= CAP, name
        reward, took = cpu_seconds(score, task, answer)
        assert reward == 0.0, name
        assert took < 2.0, f"{task.verifier.name} took too long on {name}"


# --- the generated probes (the ones ``analyst-env validate`` runs) on every real task ---


def _assert_probes_hold(tasks, expect_scorers):
    results = [probe_task(task) for task in tasks]
    for task, result in zip(tasks, results):
        assert result.adversarial_nonzero == [], (task.id, result.adversarial_nonzero)
        if task.metadata.get("gold_status", "ok") == "ok":
            assert result.natural_failed == [], (task.id, result.natural_failed)
    table = summarize(results)
    assert expect_scorers <= set(table)
    for name in expect_scorers:
        assert table[name]["adversarial_tried"] >= 3 * table[name]["tasks"] > 0, name
    return table


def test_generated_probes_hold_on_every_starter_task(starter):
    table = _assert_probes_hold(
        list(starter.values()), {"numeric", "exact", "set", "list", "dabench", "workbook_match"}
    )
    assert all(
        table[name]["natural_tried"] > 0 for name in ("numeric", "exact", "set", "list", "dabench")
    )


def test_generated_hedges_include_the_gold_and_natural_forms_are_the_documented_ones(starter):
    adversarial, natural = probes_for(starter["starter-sales-000"])
    assert "Either 640436.2 or 256171.68" in [p.answer for p in adversarial]
    assert {
        "256,171.68",
        "256 171.68",
        "256\u202f171.68",
        "256171.68 (rounded)",
        "256171.680",
    } <= {p.answer for p in natural}
    assert {"", "all of them", "nan", "1e309"} <= {p.answer for p in adversarial}


def test_generated_probes_carry_the_notes_and_second_answers_a_scorer_must_tell_apart(starter):
    collection = next(t for t in starter.values() if t.verifier.name == "set")
    adversarial, natural = probes_for(collection)
    note = next(p for p in natural if p.label == "with-note")
    second = next(p for p in adversarial if p.label == "second-list")
    assert note.answer.endswith("[note: as the question asks]")
    assert second.answer.endswith('["Other"]')
    assert score(collection, note.answer) == 1.0 and score(collection, second.answer) == 0.0


@pytest.mark.parametrize(
    ("gold_text", "run_together"), [("12.5", "125"), ("0.0", None), ("-0.00", None), ("7", None)]
)
def test_dropping_the_decimal_point_is_a_probe_only_when_it_changes_the_value(
    gold_text, run_together
):
    adversarial, _ = numeric_probes(gold_text, float(gold_text))
    probed = [p.answer for p in adversarial if p.label == "digits-run-together"]
    assert probed == ([run_together] if run_together else [])


def test_a_year_offered_as_a_candidate_is_a_hedge_not_an_aside(starter):
    task = starter[
        "starter-sales-000"
    ]  # found by the generated probes: 1963 was set aside as a year
    for hedge in [
        "Either 1963 or 256171.68",
        "1963, 256171.68",
        "256171.68 or 2022",
        "1963 - 256171.68",
    ]:
        assert score(task, hedge) == 0.0, hedge
    for aside in [
        "256171.68 for 2022",
        "2022: 256171.68",
        "In 2022 and 2023 the total was 256171.68",
    ]:
        assert score(task, aside) == 1.0, aside


@pytest.mark.parametrize(
    "spec,scorers",
    [
        ("dabench", {"dabench"}),
        ("tablebench", {"tablebench"}),
        ("dacode", {"dacode_text", "dacode_csv"}),
        ("spider_dev", {"sql_execution"}),
        ("kaggledbqa", {"sql_execution"}),
        ("sheetcopilot", {"workbook_match"}),
    ],
)
def test_generated_probes_hold_on_the_shared_benchmarks(spec, scorers, shared):
    fmt = {"spider_dev": "spider"}.get(spec, spec)
    _assert_probes_hold(load_dataset(f"{fmt}:{shared(spec)}").tasks, scorers)


# --- shared benchmarks (skipped without the data) ---


def test_sql_execution_on_spider_refuses_supersets_and_bounds_result_bytes(shared):
    tasks = {t.id: t for t in load_dataset(f"spider:{shared('spider_dev')}").tasks}
    task = tasks["spider-dev-0000"]  # SELECT count(*) FROM singer
    db = task.files[task.verifier.params["db"]]
    assert score(task, task.oracle_answer) == 1.0
    assert score(task, "SELECT count(*) AS n FROM singer;") == 1.0
    count = run_readonly(db, "SELECT count(*) FROM singer")[0][0]
    assert score(task, str(count)) == 1.0 and score(task, f"```\n{count}\n```") == 1.0
    for bad in [
        "",
        "all of them",
        f"[{count}, {count + 1}]",
        "SELECT count(*), 1 FROM singer",
        "SELECT * FROM singer",
        f"{count} or {count + 1}",
        "SELECT count(*) FROM singer UNION SELECT 1",
    ]:
        assert score(task, bad) == 0.0, bad
    blobs = (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 1000) SELECT "
        "zeroblob(9000000) FROM c"
    )
    started = time.monotonic()
    with pytest.raises(SqlRunError, match="larger than"):
        run_readonly(db, blobs)
    assert time.monotonic() - started < 5
    assert score(task, blobs) == 0.0


def test_dacode_text_and_tablebench_refuse_hedges_on_their_real_tasks(shared):
    dacode = [
        t
        for t in load_dataset(f"dacode:{shared('dacode')}").tasks
        if t.verifier.name == "dacode_text"
    ]
    for task in dacode:
        assert (
            score(task, task.oracle_answer) == 1.0 or task.metadata.get("gold_status", "ok") != "ok"
        ), task.id
        assert score(task, "") == 0.0 and score(task, "{}") == 0.0 and score(task, "{" * CAP) == 0.0
    tablebench = load_dataset(f"tablebench:{shared('tablebench')}").tasks
    for task in tablebench:
        assert score(task, task.oracle_answer) == 1.0, task.id
        assert score(task, "") == 0.0, task.id
        assert score(task, "Final Answer:") == 0.0, task.id


def test_dabench_repeats_cannot_hedge_on_the_real_questions(shared):
    tasks = load_dataset(f"dabench:{shared('dabench')}").tasks
    for task in tasks[:40]:
        assert score(task, task.oracle_answer) == 1.0, task.id
        wrong = " ".join(f"@{name}[-12345.678]" for name, _ in task.answer)
        assert score(task, wrong + " " + task.oracle_answer) == 0.0, task.id


@pytest.mark.parametrize(
    "spec,gold",
    [
        (VerifierSpec(name="dacode_text"), {"a": [1]}),
        (
            VerifierSpec(name="tablebench"),
            {"answer": "y_references = [[1, 2]]", "metric": "Pass@1"},
        ),
        (VerifierSpec(name="tablebench"), {"answer": "12, x", "metric": "EM"}),
        (
            VerifierSpec(name="tablebench"),
            {"answer": "the cat sat on the mat", "metric": "ROUGE-L"},
        ),
    ],
    ids=["dacode_text", "tablebench-pass@1", "tablebench-em", "tablebench-rouge"],
)
def test_benchmark_text_scorers_handle_capped_nasty_answers_quickly(spec, gold):
    # "{" * 64 KiB cost DA-Code's regex 1.2 s and "[" * 64 KiB TableBench's 1.2 s: both were
    # quadratic.
    for name, answer in NASTY.items():
        _, took = cpu_seconds(judge, spec, answer, gold)
        assert took < 0.5, f"{spec.name} took too long on {name}"


@pytest.fixture
def town_db(tmp_path):
    import sqlite3

    path = tmp_path / "town.sqlite"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE people (name TEXT, age INTEGER)")
        con.executemany("INSERT INTO people VALUES (?, ?)", [("Ann", 31), ("Bob", 28), ("Cid", 45)])
    con.close()
    return path


def _sql(db, answer, gold="SELECT name, age FROM people WHERE age > 30"):
    spec = VerifierSpec(name="sql_execution", params={"db": "town.sqlite"})
    return judge(spec, answer, gold, VerifyContext(task_files={"town.sqlite": str(db)})).reward


def test_sql_values_natural_forms_score_1(town_db):
    for answer in [
        '[["Ann", 31], ["Cid", 45]]',
        "name | age\nAnn | 31\nCid | 45",  # no "---" line
        "| name | age |\n|---|---|\n| Cid | 45 |\n| Ann | 31 |",
        "Ann\t31\nCid\t45",
        "SELECT age, name FROM people WHERE age >= 31",
    ]:
        assert _sql(town_db, answer) == 1.0, answer


def test_sql_values_adversarial_answers_score_0(town_db):
    for answer in [
        "",
        "all of them",
        '[["Ann", 31], ["Cid", 45], ["Bob", 28]]',
        '[["Ann", 31]]',
        "name | age\nAnn | 31\nCid | 45\nBob | 28",
        "SELECT name, age FROM people",
        "Ann | 31\nCid | 45\nname | age",
    ]:
        assert _sql(town_db, answer) == 0.0, answer


def test_a_text_line_over_text_lines_is_a_row_not_a_header_so_two_candidates_score_0(town_db):
    gold = "SELECT name FROM people WHERE age > 40"  # Cid
    for answer in ["| Bob |\n| Cid |", "Bob |\nCid |", "Bob\nCid"]:
        assert _sql(town_db, answer, gold) == 0.0, answer
    gold = "SELECT name, name FROM people WHERE age > 40"
    assert _sql(town_db, "Bob | Bob\nCid | Cid", gold) == 0.0
    assert _sql(town_db, "| Cid |", "SELECT name FROM people WHERE age > 40") == 1.0
    gold = "SELECT name, age FROM people WHERE age > 40"
    assert _sql(town_db, "name | age\nCid | 45", gold) == 1.0


def test_sql_execution_handles_capped_nasty_answers_quickly(town_db):
    for name, answer in NASTY.items():
        started = time.monotonic()
        assert _sql(town_db, answer) == 0.0, name
        assert time.monotonic() - started < 2.0, f"sql_execution took too long on {name}"


IN_PROCESS_GOLDS = {
    "numeric": 256171.68,
    "exact": "2023-05",
    "set": ["a", "b"],
    "list": ["a", "b"],
    "dabench": [["n", "1"]],
    "dacode_text": {"a": [1]},
    "tablebench": {"answer": "12, x", "metric": "EM"},
}


@pytest.mark.parametrize("name", sorted(IN_PROCESS_GOLDS))
def test_scorers_run_in_the_server_cost_little_on_the_nastiest_short_answers(name):
    """What scoring in process may cost the server: kilobytes and milliseconds, whatever the
    answer."""
    import tracemalloc

    from analyst_env.verifiers.bounded import IN_PROCESS_SCORERS, ScoringLimits

    assert set(IN_PROCESS_GOLDS) == IN_PROCESS_SCORERS
    size = ScoringLimits().in_process_max_bytes
    for shape, answer in NASTY.items():
        answer = answer.encode()[:size].decode(errors="ignore")
        _, took = cpu_seconds(judge, VerifierSpec(name=name), answer, IN_PROCESS_GOLDS[name])
        assert took < 0.25, f"{name} took too long on {shape}"
        tracemalloc.start()
        judge(VerifierSpec(name=name), answer, IN_PROCESS_GOLDS[name])
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 2 * 1024 * 1024, f"{name} allocated {peak} bytes on {shape}"


@pytest.mark.parametrize("hedge", ["0.72/1507.72", "1507.72/0.72", "0.72/15.07"])
def test_two_numbers_joined_by_a_slash_are_not_read_as_a_date(hedge):
    """A date is removed before the number is read ("251.14 on 03/20/2024"); two decimals
    around a slash are a hedge, not a date, whatever their digits."""
    spec = VerifierSpec(name="numeric", params={"abs_tol": 0.0101})
    assert judge(spec, hedge, 0.72).reward == 0.0
    assert judge(spec, "0.72 on 20.03.2024", 0.72).reward == 1.0
    assert judge(spec, "0.72 (2024-03-20)", 0.72).reward == 1.0


@pytest.mark.parametrize(
    "answer", ["1. Green Line", "- Green Line", "Green Line", '["Green Line"]']
)
def test_a_one_item_set_answered_as_a_numbered_or_bulleted_line_scores_1(answer):
    assert judge(VerifierSpec(name="set"), answer, ["Green Line"]).reward == 1.0
