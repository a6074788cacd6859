"""The curriculum's staircase and its shared state, without a server.

Two processes recording into one state dir must lose no reward (the ``flock``), a
window of failures must lower the depth, and a pick must land on the wanted depth
as the dataset's own made task reports it, or near it.
"""

from __future__ import annotations

import multiprocessing

import pytest

from analyst_env.datasets.procedural.dataset import ProceduralDataset
from analyst_env.server.curriculum import MAX_DEPTH, WINDOW, Curriculum, check_target


def _record_many(state_dir: str, reward: float, count: int) -> None:
    curriculum = Curriculum(0.5, state_dir, dataset=None)
    for _ in range(count):
        curriculum.record("shared", reward)


def test_two_processes_lose_no_reward(tmp_path):
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_record_many, args=(str(tmp_path), r, 40)) for r in (1.0, 0.0)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    (state,) = Curriculum(0.5, tmp_path, dataset=None).snapshot()
    assert state["episodes"] == 80 and state["successes"] == 40, state


def test_staircase_goes_up_then_down(tmp_path):
    curriculum = Curriculum(0.5, tmp_path, dataset=None)
    for _ in range(WINDOW * (MAX_DEPTH + 2)):
        state = curriculum.record("c", 1.0)
    assert state.depth == MAX_DEPTH  # capped
    for _ in range(WINDOW):
        state = curriculum.record("c", 0.0)
    assert state.depth == MAX_DEPTH - 1 and state.last_change.startswith("down")
    for _ in range(WINDOW):
        state = curriculum.record("c", 0.5)
    assert state.depth == MAX_DEPTH - 1 and state.last_change.startswith("held")


def test_pick_lands_near_the_wanted_depth(tmp_path):
    dataset = ProceduralDataset(3, cache_dir=tmp_path / "cache")
    curriculum = Curriculum(0.5, tmp_path, dataset)
    for _ in range(WINDOW * 2):
        curriculum.record("p", 1.0)  # depth 3
    seen = set()
    for _ in range(4):
        index, why = curriculum.pick("p", "train")
        assert why["depth_wanted"] == 3 and why["depth_drawn"] == 3, why
        made = dataset.task("train", index).metadata["depth"]
        assert abs(made - 3) <= 1, made  # the peek aims; a join may count twice
        seen.add(index)
    assert len(seen) == 4, "the cursor moves on"


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.2, 3])
def test_target_outside_zero_one_is_refused(bad):
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        check_target(bad)
