"""Spider and KaggleDBQA loaders: on tiny synthetic copies built here, and on the shared data.

The synthetic copies have the benchmarks' layout, so these tests do not depend
on which questions happen to be in the shared subset; the shared-data tests
check the counts the shared READMEs state and skip when the folder is absent.
"""

from __future__ import annotations

import doctest
import importlib
import json
import os
import sqlite3
from pathlib import Path

import pytest

from analyst_env.datasets import load_dataset
from analyst_env.datasets.kaggledbqa import load_kaggledbqa
from analyst_env.datasets.spider import load_spider
from analyst_env.verifiers import VerifyContext, judge

REPO_ROOT = Path(__file__).resolve().parents[2]


def shared(name: str) -> Path:
    env = os.environ.get("ANALYST_ENV_SHARED_DATASETS")
    return (Path(env) if env else REPO_ROOT / ".." / "shared" / "datasets").resolve() / name


def make_db(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as con:
        con.execute(
            "CREATE TABLE singer (id INTEGER PRIMARY KEY, name TEXT, age INTEGER, country TEXT)"
        )
        con.executemany(
            "INSERT INTO singer VALUES (?, ?, ?, ?)",
            [(1, "Ann", 31, "France"), (2, "Bob", 28, "Chile"), (3, "Cid", 45, "France")],
        )
    con.close()
    return path


EASY_SQL = {
    "select": [False, [[3, [0, [0, 0, False], None]]]],
    "from": {"table_units": [["table_unit", 0]], "conds": []},
    "where": [],
    "groupBy": [],
    "having": [],
    "orderBy": [],
    "limit": None,
    "intersect": None,
    "union": None,
    "except": None,
}

SPIDER_RECORDS = [
    ("How many singers are there?", "SELECT count(*) FROM singer", "concert"),
    (
        "List the names of singers from France.",
        "SELECT name FROM singer WHERE country = 'France'",
        "concert",
    ),
    ("Show names by age, oldest first.", "SELECT name FROM singer ORDER BY age DESC", "concert"),
    (
        "What is the average age?",
        "SELECT avg(age) FROM singre",
        "concert",
    ),  # broken gold: table typo
    ("How many singers?", "SELECT count(*) FROM singer", "other"),
]


@pytest.fixture()
def spider_copy(tmp_path) -> Path:
    root = tmp_path / "spider"
    make_db(root / "database" / "concert" / "concert.sqlite")
    make_db(root / "database" / "other" / "other.sqlite")
    records = [
        {
            "db_id": db,
            "question": q,
            "query": sql,
            "query_toks": [],
            "question_toks": [],
            "sql": EASY_SQL,
        }
        for q, sql, db in SPIDER_RECORDS
    ]
    (root / "dev.json").write_text(json.dumps(records))
    (root / "dev_gold.sql").write_text("".join(f"{sql}\t{db}\n" for _, sql, db in SPIDER_RECORDS))
    return root


@pytest.fixture()
def kaggle_copy(tmp_path) -> Path:
    root = tmp_path / "kaggledbqa"
    make_db(root / "databases" / "Music" / "Music.sqlite")
    examples = root / "examples"
    examples.mkdir(parents=True)
    fewshot = [
        {"db_id": "Music", "question": "How many singers?", "query": "SELECT count(*) FROM singer"}
    ]
    test = [
        {
            "db_id": "Music",
            "question": "Oldest singer?",
            "query": "SELECT name FROM singer ORDER BY age DESC LIMIT 1",
        },
        {
            "db_id": "Music",
            "question": "Countries?",
            "query": "SELECT DISTINCT country FROM singer",
        },
    ]
    (examples / "Music_fewshot.json").write_text(json.dumps(fewshot))
    (examples / "Music_test.json").write_text(json.dumps(test))
    (examples / "Music.json").write_text(
        json.dumps(fewshot + test)
    )  # upstream's combined file: skipped
    tables = [
        {
            "db_id": "Music",
            "db_overview": "Singers and where they come from.",
            "table_names_original": ["singer"],
            "column_names_original": [[-1, "*"], [0, "country"]],
            "column_descriptions": ["*", "home country of the singer"],
            "value_enums": "",
        }
    ]
    (root / "KaggleDBQA_tables.json").write_text(json.dumps(tables))
    return root


@pytest.mark.parametrize("module", ["sql_benchmarks", "spider", "kaggledbqa"])
def test_doctests(module):
    assert doctest.testmod(importlib.import_module(f"analyst_env.datasets.{module}")).failed == 0


def test_spider_copy_one_task_per_record(spider_copy):
    ds = load_spider(spider_copy)
    assert ds.name == "spider"
    assert [t.id for t in ds.tasks] == [f"spider-dev-{i:04d}" for i in range(len(SPIDER_RECORDS))]
    first = ds.tasks[0]
    assert first.split == "dev"
    assert first.files == {
        "concert.sqlite": str(spider_copy / "database" / "concert" / "concert.sqlite")
    }
    assert first.answer == first.oracle_answer == "SELECT count(*) FROM singer"
    assert [s.model_dump() for s in first.oracle_steps] == [
        {"tool": "run_sql", "arguments": {"query": "SELECT count(*) FROM singer"}}
    ]
    assert first.verifier.name == "sql_execution" and first.verifier.params == {
        "db": "concert.sqlite"
    }
    assert first.metadata == {
        "source": "spider",
        "db_id": "concert",
        "kind": "sqlite",
        "difficulty": "easy",
        "gold_status": "ok",
    }
    assert ds.tasks[4].files == {
        "other.sqlite": str(spider_copy / "database" / "other" / "other.sqlite")
    }


def test_instruction_states_question_database_and_both_answer_forms(spider_copy):
    for task, (question, gold, db) in zip(load_spider(spider_copy).tasks, SPIDER_RECORDS):
        text = task.instruction
        assert text.startswith(question)
        assert f"`{db}.sqlite`" in text
        assert "single SQLite query" in text and "result values" in text
        assert "SELECT name, age FROM people" in text and '[["Alice", 31], ["Bob", 28]]' in text
        assert gold not in text


def test_broken_gold_is_kept_and_marked(spider_copy):
    tasks = load_spider(spider_copy).tasks
    broken = [t for t in tasks if t.metadata["gold_status"] != "ok"]
    assert [t.id for t in broken] == ["spider-dev-0003"]
    assert (
        broken[0].metadata["gold_status"].startswith("error: ")
        and "singre" in broken[0].metadata["gold_status"]
    )


def test_oracle_answers_score_one_and_empty_zero(spider_copy):
    for task in load_spider(spider_copy).tasks:
        context = VerifyContext(task_files=task.files)
        oracle = judge(task.verifier, task.oracle_answer, task.answer, context).reward
        assert oracle == (1.0 if task.metadata["gold_status"] == "ok" else 0.0)
        assert judge(task.verifier, "", task.answer, context).reward == 0.0


def test_spider_gold_file_wins_and_must_line_up(spider_copy):
    gold = spider_copy / "dev_gold.sql"
    lines = gold.read_text().splitlines()
    lines[1] = "SELECT name FROM singer WHERE country = 'Chile'\tconcert"
    gold.write_text("\n".join(lines) + "\n")
    assert (
        load_spider(spider_copy).tasks[1].answer
        == "SELECT name FROM singer WHERE country = 'Chile'"
    )
    gold.write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(ValueError, match="has 4 queries but the question file has 5"):
        load_spider(spider_copy)
    lines[0] = "SELECT count(*) FROM singer\tother"
    gold.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match="line 1"):
        load_spider(spider_copy)
    gold.unlink()  # without the gold file, the records' own queries are the gold
    assert load_spider(spider_copy).tasks[1].answer == SPIDER_RECORDS[1][1]


def test_spider_bad_inputs_raise_clear_errors(tmp_path, spider_copy):
    with pytest.raises(FileNotFoundError, match="dev.json"):
        load_spider(tmp_path / "nowhere")
    (spider_copy / "dev.json").write_text(json.dumps([{"db_id": "concert", "question": "q?"}]))
    with pytest.raises(ValueError, match="record 0 lacks query"):
        load_spider(spider_copy)


def test_spider_missing_database_is_marked_not_dropped(spider_copy):
    (spider_copy / "database" / "other" / "other.sqlite").unlink()
    task = load_spider(spider_copy).tasks[4]
    assert "not found" in task.metadata["gold_status"]


def test_kaggledbqa_copy_splits_ids_and_notes(kaggle_copy):
    ds = load_kaggledbqa(kaggle_copy)
    assert ds.name == "kaggledbqa"
    assert [t.id for t in ds.tasks] == [
        "kaggledbqa-Music-fewshot-000",
        "kaggledbqa-Music-test-000",
        "kaggledbqa-Music-test-001",
    ]
    assert ds.splits() == ["fewshot", "test"]
    assert [t.id for t in load_kaggledbqa(kaggle_copy, splits=["test"]).tasks] == [
        "kaggledbqa-Music-test-000",
        "kaggledbqa-Music-test-001",
    ]
    task = ds.tasks[1]
    assert task.files == {"Music.sqlite": str(kaggle_copy / "databases" / "Music" / "Music.sqlite")}
    assert "About the database: Singers and where they come from." in task.instruction
    assert "- singer.country: home country of the singer" in task.instruction
    assert task.answer not in task.instruction
    assert task.metadata["source"] == "kaggledbqa" and task.metadata["gold_status"] == "ok"
    assert "difficulty" not in task.metadata  # these records carry no parsed sql


def test_kaggledbqa_bad_inputs_raise_clear_errors(tmp_path, kaggle_copy):
    with pytest.raises(FileNotFoundError, match="examples"):
        load_kaggledbqa(tmp_path / "nowhere")
    (kaggle_copy / "examples" / "Drums_test.json").write_text(
        json.dumps([{"db_id": "Music", "question": "q?", "query": "SELECT 1"}])
    )
    with pytest.raises(ValueError, match="should be Music_<split>.json"):
        load_kaggledbqa(kaggle_copy)


def test_registry_knows_both_formats(spider_copy, kaggle_copy):
    assert len(load_dataset(f"spider:{spider_copy}").tasks) == len(SPIDER_RECORDS)
    assert len(load_dataset(f"kaggledbqa:{kaggle_copy}").tasks) == 3


# --- the shared data ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spider_dir() -> Path:
    path = shared("spider_dev")
    if not (path / "dev.json").is_file():
        pytest.skip(f"Spider dev data not found at {path} (set ANALYST_ENV_SHARED_DATASETS)")
    return path


@pytest.fixture(scope="module")
def kaggledbqa_dir() -> Path:
    path = shared("kaggledbqa")
    if not (path / "examples").is_dir():
        pytest.skip(f"KaggleDBQA data not found at {path} (set ANALYST_ENV_SHARED_DATASETS)")
    return path


@pytest.mark.dataset
def test_shared_spider_dev(spider_dir):
    tasks = load_dataset(f"spider:{spider_dir}").tasks
    assert len(tasks) == 481
    assert len({t.id for t in tasks}) == 481
    assert {t.split for t in tasks} == {"dev"}
    assert all(t.answer not in t.instruction for t in tasks)
    assert {t.metadata["difficulty"] for t in tasks} == {"easy", "medium", "hard", "extra"}
    assert all(t.metadata["gold_status"] == "ok" for t in tasks)  # the README: all gold queries run


@pytest.mark.dataset
def test_shared_kaggledbqa(kaggledbqa_dir):
    tasks = load_dataset(f"kaggledbqa:{kaggledbqa_dir}").tasks
    assert len(tasks) == 28
    assert len({t.id for t in tasks}) == 28
    assert {t.split for t in tasks} == {"fewshot"}
    assert {t.metadata["db_id"] for t in tasks} == {
        "GeoNuclearData",
        "GreaterManchesterCrime",
        "StudentMathScore",
    }
    assert all(t.answer not in t.instruction for t in tasks)
    assert all("About the database:" in t.instruction for t in tasks)
    assert all(t.metadata["gold_status"] == "ok" for t in tasks)
