"""Spider and KaggleDBQA tasks end to end against a live uvicorn server.

On a tiny Spider-layout copy built here: an agent that pastes what ``run_sql``
printed earns 1.0, and a prediction that tries to write the database earns 0.0
and leaves the host's database untouched. On the shared data (skipped when
absent): the oracle policy (run the gold with ``run_sql``, submit it) scores
1.0 on every task whose gold runs, and the null policy 0.0 on all.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sqlite3
from pathlib import Path

import pytest

from analyst_env.client import AnalystEnv
from analyst_env.datasets.kaggledbqa import load_kaggledbqa
from analyst_env.datasets.spider import load_spider
from analyst_env.evaluation.engine import evaluate
from analyst_env.server.app import build_app
from analyst_env.server.local_server import BackgroundServer
from analyst_env.server.runtime import Runtime
from analyst_env.server.settings import Settings

pytestmark = pytest.mark.live

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED = (
    Path(os.environ["ANALYST_ENV_SHARED_DATASETS"])
    if os.environ.get("ANALYST_ENV_SHARED_DATASETS")
    else REPO_ROOT / ".." / "shared" / "datasets"
).resolve()
SPIDER_DIR = SHARED / "spider_dev"
KAGGLEDBQA_DIR = SHARED / "kaggledbqa"
HAVE_SPIDER = (SPIDER_DIR / "dev.json").is_file()
HAVE_KAGGLEDBQA = (KAGGLEDBQA_DIR / "examples").is_dir()


def make_spider_copy(root: Path) -> Path:
    db = root / "database" / "shop" / "shop.sqlite"
    db.parent.mkdir(parents=True)
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT, qty INTEGER)")
        con.executemany(
            "INSERT INTO orders VALUES (?, ?, ?)", [(1, "ann", 3), (2, "bob", 4), (3, "ann", 6)]
        )
    con.close()
    records = [
        {
            "db_id": "shop",
            "question": "Total quantity per customer?",
            "query": "SELECT customer, sum(qty) FROM orders GROUP BY customer",
        },
        {"db_id": "shop", "question": "How many orders?", "query": "SELECT count(*) FROM orders"},
    ]
    (root / "dev.json").write_text(json.dumps(records))
    return root


@pytest.fixture(scope="module")
def tiny_spider(tmp_path_factory):
    ds = load_spider(make_spider_copy(tmp_path_factory.mktemp("spider-live")))
    # served next to the shared Spider set, whose ids are the same spider-dev-NNNN
    return ds.model_copy(
        update={"tasks": [t.model_copy(update={"id": "tiny-" + t.id}) for t in ds.tasks]}
    )


@pytest.fixture(scope="module")
def shared_datasets():
    found = {}
    if HAVE_SPIDER:
        found["spider"] = load_spider(SPIDER_DIR)
    if HAVE_KAGGLEDBQA:
        found["kaggledbqa"] = load_kaggledbqa(KAGGLEDBQA_DIR)
    return found


@pytest.fixture(scope="module")
def url(tiny_spider, shared_datasets):
    settings = Settings(cell_timeout_s=20.0, shell_timeout_s=20.0, max_sessions=16)
    runtime = Runtime(settings, datasets=[tiny_spider, *shared_datasets.values()])
    try:
        with BackgroundServer(build_app(settings, runtime=runtime)) as base_url:
            yield base_url
    finally:
        runtime.close()


def test_pasting_the_run_sql_table_scores_one(url, tiny_spider):
    task = tiny_spider.tasks[0]
    with AnalystEnv(base_url=url).sync() as env:
        first = env.reset(task_id=task.id)
        assert "single SQLite query" in first.observation.instruction
        assert task.answer not in first.observation.instruction
        shown = env.run_sql("SELECT sum(qty) AS total, customer FROM orders GROUP BY 2")
        assert "ann" in shown.observation.text
        done = env.final_answer(shown.observation.text)
        assert done.done and done.reward == 1.0
        assert done.observation.metadata["reward_breakdown"]["components"]["result_match"] == 1.0


def test_a_write_attempt_scores_zero_and_leaves_the_host_database_alone(url, tiny_spider):
    task = tiny_spider.tasks[1]
    host_db = Path(task.files["shop.sqlite"])
    before = hashlib.sha256(host_db.read_bytes()).hexdigest()
    with AnalystEnv(base_url=url).sync() as env:
        env.reset(task_id=task.id)
        done = env.final_answer("WITH x AS (SELECT 1) DELETE FROM orders")
        assert done.done and done.reward == 0.0
    assert hashlib.sha256(host_db.read_bytes()).hexdigest() == before


def run_policy(url, tasks, policy):
    return asyncio.run(evaluate(url, tasks, policy, concurrency=8))


def check_oracle_and_null(url, tasks):
    good = {t.id for t in tasks if t.metadata["gold_status"] == "ok"}
    oracle = run_policy(url, tasks, "oracle")
    assert [r for r in oracle if "error" in r and r["task_id"] in good] == []
    assert {r["task_id"] for r in oracle} >= good
    assert [r for r in oracle if r["task_id"] in good and r["reward"] != 1.0] == []
    null = run_policy(url, tasks, "null")
    assert [r for r in null if "error" in r] == []
    assert all(r["reward"] == 0.0 for r in null)


@pytest.mark.dataset
@pytest.mark.skipif(not HAVE_SPIDER, reason=f"Spider dev data not found at {SPIDER_DIR}")
def test_spider_dev_oracle_one_null_zero(url, shared_datasets):
    check_oracle_and_null(url, shared_datasets["spider"].tasks)


@pytest.mark.dataset
@pytest.mark.skipif(not HAVE_KAGGLEDBQA, reason=f"KaggleDBQA data not found at {KAGGLEDBQA_DIR}")
def test_kaggledbqa_oracle_one_null_zero(url, shared_datasets):
    check_oracle_and_null(url, shared_datasets["kaggledbqa"].tasks)
