"""The shipped ``starter`` set: size, balance, determinism, scorability, no leaks, reproducible
answers."""

import json
import math
import sqlite3
import time
from collections import Counter
from pathlib import Path

import openpyxl
import pandas as pd
import pytest

from analyst_env.datasets.shipped import starter as starter_mod
from analyst_env.datasets.shipped.draft import leaks
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


def test_every_template_yields_tasks(starter):
    made = Counter(t.metadata["template"] for t in starter.tasks)
    questions = [tpl for *_, templates, _ in starter_mod.SOURCES for tpl in templates]
    books = [tpl for _, templates in starter_mod.WORKBOOK_SOURCES for tpl in templates]
    for template in questions + books:
        assert made[template.__name__] >= 1, template.__name__
        assert made[template.__name__] <= getattr(template, "reps", 5), template.__name__


def test_cache_key_names_the_generator_version(tmp_path):
    assert (
        starter_mod.starter_dir(0, tmp_path).name
        == f"starter-v{starter_mod.GENERATOR_VERSION}-seed0"
    )
    assert starter_mod.GENERATOR_VERSION >= 3, "the grown set must not reuse v1 or v2 caches"


def test_train_test_split(starter):
    """Question and result-workbook tasks are split 80/20 each, so adding workbooks moved no
    question task."""
    assert starter.splits() == ["test", "train"]
    books = [t for t in starter.tasks if t.verifier.name == "workbook_match"]
    questions = [t for t in starter.tasks if t.verifier.name != "workbook_match"]
    for family in (books, questions):
        assert sum(t.split == "test" for t in family) == round(0.2 * len(family))
    assert starter_mod._split_of([t.id for t in questions], 0) == {t.id: t.split for t in questions}


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


def test_generation_is_deterministic(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    started = time.process_time()  # CPU time: the machine is shared, wall time is not ours
    ta = starter_mod.generate(a, seed=7)
    elapsed = time.process_time() - started
    tb = starter_mod.generate(b, seed=7)
    names = sorted(str(p.relative_to(a)) for p in a.rglob("*") if p.is_file())
    assert names == sorted(str(p.relative_to(b)) for p in b.rglob("*") if p.is_file())
    assert any(n.startswith("references/") for n in names)
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name

    def strip(t):
        record = t.model_dump() | {"files": sorted(t.files)}
        for ref in record["answer"]["references"] if t.verifier.name == "workbook_match" else []:
            ref["path"] = Path(ref["path"]).name
        return record

    assert [strip(t) for t in ta] == [strip(t) for t in tb]
    assert len(ta) >= 300
    assert elapsed < 10, f"generation took {elapsed:.1f}s of CPU"


def test_other_seed_differs(tmp_path, starter):
    other = starter_mod.load_starter(seed=1, cache_dir=tmp_path)
    assert [t.answer for t in other.tasks] != [t.answer for t in starter.tasks]


def test_second_load_uses_cache(starter_cache, starter, monkeypatch):
    def boom(*a, **k):
        raise AssertionError("regenerated")

    monkeypatch.setattr(starter_mod, "generate", boom)
    again = starter_mod.load_starter(seed=0, cache_dir=starter_cache)
    assert [t.model_dump() for t in again.tasks] == [t.model_dump() for t in starter.tasks]
    assert not [p for p in starter_cache.iterdir() if p.name.startswith(".")], (
        "temp dirs left behind"
    )


def test_manifest_paths_are_relative(starter_cache, starter):
    manifest = json.loads((starter_mod.starter_dir(0, starter_cache) / "manifest.json").read_text())
    assert all(n == p for rec in manifest["tasks"] for n, p in rec["files"].items())
    assert all(Path(p).is_file() for t in starter.tasks for p in t.files.values())
    refs = [
        r["path"]
        for rec in manifest["tasks"]
        if rec["verifier"]["name"] == "workbook_match"
        for r in rec["answer"]["references"]
    ]
    assert refs and all(p.startswith("references/") for p in refs)
    assert all(
        Path(r["path"]).is_file()
        for t in starter.tasks
        if t.verifier.name == "workbook_match"
        for r in t.answer["references"]
    )


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


def test_damaged_cache_is_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(
        starter_mod, "generate", lambda d, seed: (d / "manifest.json").write_text("{}")
    )  # cheap
    broken = starter_mod.starter_dir(0, tmp_path)
    broken.mkdir(parents=True)
    (broken / "sales.csv").write_text("half-written")
    with pytest.raises(RuntimeError, match="damaged"):
        starter_mod.load_starter(seed=0, cache_dir=tmp_path)
