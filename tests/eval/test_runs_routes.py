"""The Runs page's JSON routes on the real server, over runs that ``run_eval`` wrote there."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from analyst_env.evaluation.run import EvalSettings, run_eval
from analyst_env.run_records.run_log import runs_dir
from analyst_env.trajectory_files import trajectories_dir

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def two_runs(standin_server, env_url, eval_tasks, eval_state_dir):
    """An oracle run and a model run that solves half its episodes, in the server's runs dir."""
    common = {"dataset": "tiny", "runs_dir": str(runs_dir(eval_state_dir)), "fresh": True}
    oracle, _ = asyncio.run(
        run_eval(
            EvalSettings(policy="oracle", run_name="oracle-run", **common), eval_tasks, env_url
        )
    )
    standin_server.use("alternate")
    model, _ = asyncio.run(
        run_eval(
            EvalSettings(
                model="standin",
                model_url=f"{standin_server.url}/v1",
                samples=2,
                run_name="model-run",
                retry_backoff_s=0.01,
                **common,
            ),
            eval_tasks,
            env_url,
        )
    )
    # the expected figures below assume every episode reached the model's answer
    assert model["errors"] == 0, [r for r in model["episode_rows"] if r.get("error")]
    return oracle, model


def test_runs_are_listed_newest_first(two_runs, env_url):
    listed = httpx.get(f"{env_url}/web/api/runs").json()["runs"]
    ids = [r["run_id"] for r in listed]
    assert ids.index("model-run") < ids.index("oracle-run")
    model = next(r for r in listed if r["run_id"] == "model-run")
    assert model["mean_reward"] == 0.5 and model["samples"] == 2 and model["complete"]
    assert model["model"]["name"] == "standin" and model["pass_at_k"] == {"1": 0.5, "2": 1.0}


def test_a_run_links_each_episode_to_its_recording(two_runs, env_url, eval_state_dir):
    report = httpx.get(f"{env_url}/web/api/runs/model-run").json()
    assert report["n"] == 3 and report["episodes"] == 6 and report["has_html"]
    for row in report["episode_rows"]:
        assert row["trajectory"], row
        assert (trajectories_dir(eval_state_dir) / row["trajectory"]).is_file()
        replay = httpx.get(f"{env_url}/web/api/trajectories/{row['trajectory']}").json()
        assert replay["records"][0]["task_id"] == row["task_id"]
        assert replay["records"][-1]["reward"] == row["reward"]


def test_two_runs_compared_task_by_task(two_runs, env_url):
    answer = httpx.get(
        f"{env_url}/web/api/runs-compare", params={"a": "oracle-run", "b": "model-run"}
    ).json()
    assert answer["counts"] == {"a_better": 3, "b_better": 0, "same": 0, "only_a": 0, "only_b": 0}
    row = next(t for t in answer["tasks"] if t["task_id"] == "tiny-csv")
    assert row["a"]["reward"] == 1.0 and row["b"]["reward"] == 0.5 and row["delta"] == -0.5
    assert answer["a"]["policy"] == "oracle" and answer["b"]["model"]["name"] == "standin"


def test_the_html_report_is_served_without_scripts(two_runs, env_url):
    answer = httpx.get(f"{env_url}/web/api/runs/model-run/report.html")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in answer.headers["content-security-policy"]
    assert "data:image/png;base64," in answer.text and "<script" not in answer.text


def test_a_partial_run_shows_what_it_has(two_runs, env_url, eval_state_dir):
    log = runs_dir(eval_state_dir) / "model-run" / "log.jsonl"
    partial = runs_dir(eval_state_dir) / "partial-run"
    partial.mkdir(exist_ok=True)
    lines = log.read_text().splitlines()
    junk = [
        '{"type": "episode", "task_id": 7, "reward": 1}',
        '{"type": "episode", "task_id": "x"}',
        "[1, 2]",
        '{"type": "episode", "tor',
    ]
    (partial / "log.jsonl").write_text("\n".join([*lines[:3], *junk]))
    report = httpx.get(f"{env_url}/web/api/runs/partial-run").json()
    assert report["episodes"] == 2 and not report["complete"] and not report["has_html"]
    assert httpx.get(f"{env_url}/web/api/runs/partial-run/report.html").status_code == 404


@pytest.mark.parametrize("bad", ["..", "%2e%2e", "nope", "a%2Fb", "x" * 300, "oracle-run%00"])
def test_bad_run_ids_are_refused(two_runs, env_url, bad):
    answer = httpx.get(f"{env_url}/web/api/runs/{bad}")
    assert answer.status_code == 404
    assert (
        httpx.get(
            f"{env_url}/web/api/runs-compare", params={"a": bad, "b": "oracle-run"}
        ).status_code
        == 404
    )
    assert httpx.get(f"{env_url}/health").status_code == 200
