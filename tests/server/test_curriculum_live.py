"""Live: a curriculum moves a simulated learner up the depths as it gets better.

``analyst-env serve --dataset procedural:SEED --curriculum 0.5`` with two workers sharing
one state dir; a learner over the real client (``AnalystEnv``) whose chance of answering
right rises with its step count and falls with the task's depth. The depth served must
rise with the learner's skill, every reset must say why it got its task (and never the
gold), and the refusals are one line each.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from server.serve_process import ServeProcess

from analyst_env.client import AnalystEnv
from analyst_env.datasets.procedural.dataset import ProceduralDataset

pytestmark = pytest.mark.live

SEED = 7
EPISODES = 72
WHY_KEYS = {
    "client_id",
    "target_success",
    "depth_wanted",
    "depth_drawn",
    "depth_served",
    "level_served",
    "reason",
}


def skill(step: int) -> float:
    """The learner's chance of answering a depth-1 task right: rises over the run."""
    return min(1.0, 0.35 + step / 40)


def served_depths(url: str, gold_of, client_id: str) -> list[tuple[int, int, float]]:
    """``(step, depth wanted, reward)`` of each episode the learner plays."""
    rng = random.Random(0)
    rows = []
    with AnalystEnv(base_url=url).sync() as env:
        for step in range(EPISODES):
            reset = env.reset(client_id=client_id)
            meta = reset.observation.metadata
            why = meta["curriculum"]
            task_id = meta["task_id"]
            gold = gold_of(task_id)
            # what the curriculum says is its own state and the depth, never the task's answer
            assert set(why) == WHY_KEYS and why["client_id"] == client_id, why
            assert len(str(gold)) < 3 or str(gold) not in str(why), why
            p = skill(step) - 0.15 * (why["depth_wanted"] - 1)
            answer = gold if rng.random() < p else "certainly not the answer"
            result = env.final_answer(answer)
            rows.append((step, why["depth_wanted"], float(result.reward or 0.0)))
    return rows


def web_depth(url: str, client: str) -> int:
    clients = httpx.get(f"{url}/web/curriculum", timeout=10).json()["clients"]
    return next(c["depth"] for c in clients if c["client"] == client)


def test_served_depth_rises_with_the_learner(tmp_path):
    made = ProceduralDataset(SEED, cache_dir=tmp_path / "gold")

    def gold_of(task_id: str) -> str:
        return str(made.task_by_id(task_id).oracle_answer)

    with ServeProcess(
        tmp_path, "--dataset", f"procedural:{SEED}", "--curriculum", "0.5", "--workers", "2"
    ) as server:
        rows = served_depths(server.url, gold_of, "learner-1")
        depth_now = web_depth(server.url, "learner-1")
        for _ in range(4):  # fresh connections, whichever worker takes them: the same depth
            with AnalystEnv(base_url=server.url).sync() as env:
                why = env.reset(client_id="learner-1").observation.metadata["curriculum"]
                assert why["depth_wanted"] == depth_now, why
        with AnalystEnv(base_url=server.url).sync() as env:
            why = env.reset().observation.metadata["curriculum"]
            assert why["client_id"].startswith("connection-") and why["depth_wanted"] == 1, why
            with pytest.raises(Exception, match="client_id") as refused:
                env.reset(client_id="no spaces/or slashes")
            assert len(str(refused.value).strip().splitlines()) == 1, refused.value
        metrics = httpx.get(f"{server.url}/metrics", timeout=10).text
        web = httpx.get(f"{server.url}/web/curriculum", timeout=10).json()
    first, last = rows[:16], rows[-16:]
    mean = lambda part: sum(r[1] for r in part) / len(part)  # noqa: E731
    assert mean(last) >= mean(first) + 1.5, rows
    assert 'analyst_env_curriculum_depth{client="learner-1"}' in metrics
    assert any(c["client"] == "learner-1" and c["episodes"] == EPISODES for c in web["clients"])
    print("\n".join(f"{s}\t{d}\t{r}" for s, d, r in rows))


def _serve_refusal(tmp_path: Path, *args: str) -> str:
    exe = str(Path(sys.executable).with_name("analyst-env"))
    done = subprocess.run(
        [exe, "serve", "--port", "1", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={"ANALYST_ENV_STATE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode != 0
    return done.stderr.strip()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--dataset", "starter", "--curriculum", "0.5"), "needs a procedural dataset"),
        (("--dataset", "procedural:1", "--curriculum", "1.5"), "curriculum"),
        (("--dataset", "procedural:1", "--curriculum", "0"), "curriculum"),
    ],
)
def test_serve_refuses_a_curriculum_it_cannot_keep(tmp_path, args, says):
    line = _serve_refusal(tmp_path, *args)
    assert says in line and len(line.splitlines()) == 1, line
