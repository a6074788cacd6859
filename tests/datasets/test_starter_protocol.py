"""Every starter template works through the real server and tools: oracle earns 1.0, an empty answer
0.0.

One task per template is played over the wire (WebSocket reset, then
``final_answer``) against the same uvicorn app ``analyst-env serve`` runs,
with the starter set loaded by name as a user would.
"""

import asyncio

import pytest

from analyst_env.client import AnalystEnv
from analyst_env.evaluation.engine import evaluate
from analyst_env.server.app import build_app
from analyst_env.server.local_server import BackgroundServer
from analyst_env.server.settings import Settings

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def sample(starter):
    """The first task of every template."""
    first = {}
    for t in starter.tasks:
        first.setdefault(t.metadata["template"], t)
    return list(first.values())


@pytest.fixture(scope="module")
def starter_url():
    app = build_app(Settings(dataset="starter", max_sessions=16))
    with BackgroundServer(app) as url:
        yield url


@pytest.mark.parametrize("policy, reward", [("oracle", 1.0), ("null", 0.0)])
def test_one_task_per_template_over_the_wire(starter_url, sample, policy, reward):
    assert len(sample) >= 90
    rows = asyncio.run(evaluate(starter_url, sample, policy, concurrency=8))
    wrong = [r for r in rows if r["reward"] != reward or "error" in r]
    assert not wrong, wrong[:5]
    assert {r["task_id"] for r in rows} == {t.id for t in sample}


async def solve_in_sandbox(url, task, code, sql=None):
    """Compute an answer with the agent's own tools (kernel, SQL) and submit what the kernel
    printed."""
    async with AnalystEnv(base_url=url, message_timeout_s=120) as env:
        await env.reset(task_id=task.id)
        if sql is not None:
            out = await env.run_sql(sql)
            assert not (out.observation.result or {}).get("is_error"), out.observation.text
        out = await env.add_and_execute_code_cell(code)
        answer = out.observation.text.strip().splitlines()[-1]
        done = await env.final_answer(answer)
        return answer, done.reward


def test_agent_tools_handle_time_zones_and_mixed_cells(starter_url, starter):
    """The sandbox's pandas has the zone database, and DuckDB loads sheets with mixed-type cells."""
    tz = next(t for t in starter.tasks if t.metadata["template"] == "ev_local_day_purchases")
    p = tz.metadata["params"]
    code = (
        "import pandas as pd\ne = pd.read_csv('events.csv')\n"
        "local = pd.to_datetime(e.ts_utc, "
        f"utc=True).dt.tz_convert({p['zone']!r}).dt.strftime('%Y-%m-%d')\n"
        f"print(((e.event_type == 'purchase') & (local == {p['date']!r})).sum())"
    )
    assert asyncio.run(solve_in_sandbox(starter_url, tz, code))[1] == 1.0

    blank = next(t for t in starter.tasks if t.metadata["template"] == "bu_missing_category")
    code = (
        "import pandas as pd\nprint(pd.read_excel('budget.xlsx', "
        "sheet_name='Expenses').category.isna().sum())"
    )
    sql = "SELECT COUNT(*) FROM budget_expenses WHERE category IS NULL"
    assert asyncio.run(solve_in_sandbox(starter_url, blank, code, sql=sql))[1] == 1.0
