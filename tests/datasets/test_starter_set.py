"""The ``starter`` set (a frozen task directory): size, balance, stability, scorability, no
leaks, answers reproduced from its files."""

import hashlib
import json
import math
import sqlite3
from collections import Counter
from pathlib import Path

import openpyxl
import pandas as pd

from analyst_env.datasets.procedural.draft import leaks
from analyst_env.datasets.procedural.taskdir import load_task_dir
from analyst_env.datasets.registry import load_dataset
from analyst_env.datasets.starter_set import STARTER_DIR
from analyst_env.verifiers import score


def by_template(ds, name):
    found = [t for t in ds.tasks if t.metadata["template"] == name]
    assert found, f"no task from template {name}"
    return found


def test_size_kinds_levels_ids(starter):
    tasks = starter.tasks
    assert len(tasks) >= 300
    kinds = Counter(t.metadata["kind"] for t in tasks)
    assert set(kinds) == {"csv", "sqlite", "excel"}
    assert all(n >= len(tasks) / 4 for n in kinds.values()), kinds
    assert {t.metadata["level"] for t in tasks} == {"easy", "medium", "hard"}
    assert {t.verifier.name for t in tasks} == {
        "numeric",
        "exact",
        "set",
        "list",
        "dabench",
        "workbook_match",
    }
    assert len({t.id for t in tasks}) == len(tasks)
    first = starter.by_id()["starter-sales-000"]  # the README's example
    assert first.metadata["kind"] == "csv" and list(first.files) == ["sales.csv"]


def test_every_template_yields_a_few_tasks(starter):
    made = Counter(t.metadata["template"] for t in starter.tasks)
    assert len(made) >= 150, len(made)
    assert all(1 <= n <= 6 for n in made.values()), made.most_common(3)


# Ids, questions and gold answers of the frozen set: runs and papers compare against them.
STARTER_DIGEST = "a96f74f9e7ebb9bc87fcb9ac879731b927985bbd69f53a5f597725103b174a1a"


def test_ids_questions_and_answers_are_the_published_ones(starter):
    """An edit to datasets/starter/ changes every result ever reported on ``starter``: new or
    changed tasks go into a new named set (``analyst-env generate``), never into this one."""
    lines = [
        json.dumps([t.id, t.instruction, t.answer, t.verifier.model_dump()], sort_keys=True)
        for t in starter.tasks
        if t.verifier.name != "workbook_match"
    ]
    books = [
        [t.id, t.instruction, hashlib.sha256(Path(r["path"]).read_bytes()).hexdigest()]
        for t in starter.tasks
        if t.verifier.name == "workbook_match"
        for r in t.answer["references"]
    ]
    files = sorted(
        (p.name, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in (STARTER_DIR / "files").iterdir()
    )
    digest = hashlib.sha256(json.dumps([lines, books, files]).encode()).hexdigest()
    assert digest == STARTER_DIGEST


def test_it_is_served_as_any_task_directory_is(starter):
    """``starter`` is the task-directory format over the package's folder: the same tasks as
    ``tasks:DIR``, every file and reference inside that folder."""
    as_dir = load_task_dir(str(STARTER_DIR))
    assert [t.model_dump() for t in as_dir.tasks] == [t.model_dump() for t in starter.tasks]
    assert load_dataset("starter").name == "starter"
    paths = [Path(p) for t in starter.tasks for p in t.files.values()] + [
        Path(r["path"])
        for t in starter.tasks
        if t.verifier.name == "workbook_match"
        for r in t.answer["references"]
    ]
    assert all(p.is_file() and STARTER_DIR in p.parents for p in paths)
    assert len({p for p in paths if p.parent.name == "files"}) == 13


def test_train_test_split(starter):
    """Question and result-workbook tasks are split 80/20 each, so adding workbooks moved no
    question task."""
    assert starter.splits() == ["test", "train"]
    books = [t for t in starter.tasks if t.verifier.name == "workbook_match"]
    questions = [t for t in starter.tasks if t.verifier.name != "workbook_match"]
    for family in (books, questions):
        assert sum(t.split == "test" for t in family) == round(0.2 * len(family))


def test_oracle_scores_one_and_empty_zero(starter):
    for t in starter.tasks:
        if t.verifier.name == "workbook_match":
            continue  # scored from the episode's files: tests/datasets/test_starter_workbooks.py
        assert score(t.verifier, t.oracle_answer, t.answer) == 1.0, t.id
        assert score(t.verifier, "", t.answer) == 0.0, t.id


def test_instructions_do_not_leak_answers(starter):
    for t in starter.tasks:
        if t.verifier.name in ("numeric", "exact"):
            style = "text" if t.verifier.name == "exact" else "number"
            assert not leaks(t.instruction, t.oracle_answer, style), t.id
        if t.verifier.name == "numeric":
            assert t.oracle_answer not in t.instruction, t.id
        for name in t.files:
            assert name in t.instruction


# ---- independent recomputation, straight from the files on disk -----------------------


def test_csv_answer_reproducible(starter):
    for t in by_template(starter, "sales_region_year_total"):
        df = pd.read_csv(t.files["sales.csv"], parse_dates=["order_date"])
        p = t.metadata["params"]
        sub = df[(df["region"] == p["region"]) & (df["order_date"].dt.year == p["year"])]
        assert math.isclose(round(sub["revenue"].sum(), 2), t.answer, abs_tol=1e-6)
    for t in by_template(starter, "emp_missing_scores"):
        df = pd.read_csv(t.files["employees.csv"])
        assert int(df["performance_score"].isna().sum()) == t.answer


def test_sqlite_answer_reproducible(starter):
    for t in by_template(starter, "rt_city_revenue"):
        con = sqlite3.connect(t.files["retail.sqlite"])
        (v,) = con.execute(
            "SELECT SUM(oi.quantity * p.unit_price * (1 - oi.discount)) FROM order_items oi "
            "JOIN orders o ON o.order_id = oi.order_id JOIN customers c ON c.customer_id = "
            "o.customer_id "
            "JOIN products p ON p.product_id = oi.product_id WHERE o.status = 'completed' "
            "AND c.city = ?",
            (t.metadata["params"]["city"],),
        ).fetchone()
        con.close()
        assert math.isclose(round(v, 2), t.answer, abs_tol=1e-6)
    for t in by_template(starter, "un_major_count"):
        con = sqlite3.connect(t.files["university.sqlite"])
        (v,) = con.execute(
            "SELECT COUNT(*) FROM students s JOIN departments d ON d.dept_id = s.major_dept_id "
            "WHERE d.dept_name = ?",
            (t.metadata["params"]["department"],),
        ).fetchone()
        con.close()
        assert v == t.answer


def test_excel_answer_reproducible(starter):
    for t in by_template(starter, "inv_wh_quantity"):
        wb = openpyxl.load_workbook(t.files["inventory.xlsx"], read_only=True)
        rows = list(wb["Stock"].iter_rows(values_only=True))
        wb.close()
        col = {name: i for i, name in enumerate(rows[0])}
        total = sum(
            r[col["quantity"]]
            for r in rows[1:]
            if r[col["warehouse"]] == t.metadata["params"]["warehouse"]
        )
        assert total == t.answer
    for t in by_template(starter, "fi_line_profit"):
        wb = openpyxl.load_workbook(t.files["financials.xlsx"], read_only=True)
        profit = 0.0
        for q in ("Q1", "Q2", "Q3", "Q4"):
            rows = list(wb[q].iter_rows(values_only=True))
            col = {name: i for i, name in enumerate(rows[0])}
            profit += sum(
                r[col["revenue"]] - r[col["cost"]]
                for r in rows[1:]
                if r[col["product_line"]] == t.metadata["params"]["product_line"]
            )
        wb.close()
        assert math.isclose(round(profit, 2), t.answer, abs_tol=1e-6)
