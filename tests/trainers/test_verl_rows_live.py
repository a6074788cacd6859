"""veRL dataset rows from a live server's Task API (``trainers/verl_rows.py``, no veRL needed).

The rows name each episode the way the agent loop and the tools read it back: by task id
on a listed split, by place (split and index) on a split made on demand, where the
tool route's prompt needs the task's instruction, read by range.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import curriculum_server, procedural_server

from analyst_env.server.app import build_app
from analyst_env.server.local_server import BackgroundServer
from analyst_env.trainers.verl_rows import dataset_rows, export_parquet, tool_dataset_rows

pytestmark = pytest.mark.live

SEED = 4242


@pytest.fixture(scope="module")
def tiny_server(settings, runtime):
    with BackgroundServer(build_app(settings, runtime=runtime)) as url:
        yield url


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with procedural_server(tmp_path_factory.mktemp("procedural-cache"), SEED, 4) as live:
        yield live


def test_agent_loop_rows_name_tasks_by_id_and_survive_a_parquet_round_trip(tiny_server, tmp_path):
    rows = dataset_rows(tiny_server, "train", seed=3)
    assert {r["extra_info"]["task_id"] for r in rows} >= {"tiny-csv", "tiny-sqlite"}
    row = next(r for r in rows if r["extra_info"]["task_id"] == "tiny-csv")
    assert row["agent_name"] == "analyst_env" and row["extra_info"]["seed"] == 3
    assert row["prompt"][-1] == {"role": "user", "content": ""}  # the loop puts the task there
    assert row["reward_model"]["ground_truth"] == ""  # the server scores, not veRL
    back = pq.read_table(export_parquet(tiny_server, tmp_path / "rows.parquet")).to_pylist()
    assert [r["extra_info"]["task_id"] for r in back] == [r["extra_info"]["task_id"] for r in rows]


def test_tool_rows_carry_the_task_text_and_the_episode_for_every_tool(tiny_server):
    rows = tool_dataset_rows(tiny_server, "train", tool_names=["run_sql", "final_answer"])
    row = next(r for r in rows if "sales.csv" in r["prompt"][-1]["content"])
    assert row["agent_name"] == "tool_agent"
    assert row["prompt"][-1]["content"].startswith("What is the total amount in sales.csv?")
    kwargs = row["extra_info"]["tools_kwargs"]
    assert set(kwargs) == {"run_sql", "final_answer"}
    assert kwargs["run_sql"]["create_kwargs"]["task_id"] == "tiny-csv"


def test_rows_of_a_split_made_on_demand_are_places(served):
    url, runtime = served
    rows = dataset_rows(url, "train", num_tasks=2, start=5, seed=1)
    assert [r["extra_info"] for r in rows] == [
        {"task_id": None, "seed": 1, "split": "train", "index": 5},
        {"task_id": None, "seed": 1, "split": "train", "index": 6},
    ]
    with pytest.raises(ValueError, match="num_tasks"):
        dataset_rows(url, "train")
    (tool_row,) = tool_dataset_rows(url, "train", num_tasks=1, start=7, tool_names=["run_sql"])
    place = tool_row["extra_info"]["tools_kwargs"]["run_sql"]["create_kwargs"]
    assert place == {"task_id": None, "split": "train", "index": 7, "seed": 0}
    made = runtime.select(task_id=None, split="train", index=7, seed=None)
    assert tool_row["prompt"][-1]["content"].startswith(made.instruction.strip())


def test_curriculum_rows_name_a_client_and_a_group_that_the_loop_reads_back(tmp_path):
    """Rows for a ``--curriculum`` server: the episode each names (read back as the agent
    loop does, ``AnalystScenario.from_fields``) is the server's pick for the client, one
    task per row however many trajectories veRL samples of it."""
    from analyst_env.client import AnalystEnv
    from analyst_env.trainers.art import AnalystScenario

    with pytest.raises(ValueError, match="num_tasks"):
        dataset_rows("http://127.0.0.1:1", client_id="verl-1")
    with curriculum_server(tmp_path, SEED, sessions=4) as url:
        rows = dataset_rows(url, client_id="verl-1", num_tasks=2, seed=5)
        pq.write_table(pa.Table.from_pylist(rows), tmp_path / "rows.parquet")
        rows = pq.read_table(tmp_path / "rows.parquet").to_pylist()  # as veRL reads them
        assert [r["extra_info"]["index"] for r in rows] == [0, 1]
        served = []
        with AnalystEnv(base_url=url).sync() as env:
            for row in rows + rows[:1]:  # the first row sampled twice
                scenario = AnalystScenario.from_fields(row["extra_info"])
                reset = env.reset(**scenario.reset_options())
                why = reset.observation.metadata["curriculum"]
                assert why["client_id"] == "verl-1", why
                served.append(reset.observation.task_id)
        assert served[0] == served[2] != served[1], served
