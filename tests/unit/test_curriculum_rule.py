"""The curriculum's staircase and its shared state, without a server.

Two processes recording into one state dir must lose no reward (the ``flock``), a
window of failures must lower the depth, and a pick must land on the wanted depth
as the dataset's own made task reports it, or near it.
"""

from __future__ import annotations

import multiprocessing

import pytest

from analyst_env.datasets.procedural.dataset import ProceduralDataset
from analyst_env.server import curriculum as curriculum_rules
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


def test_resets_of_one_group_get_one_task(tmp_path, monkeypatch):
    """A GRPO group's rollouts compare attempts at one problem: every reset of a group gets
    its first reset's task; another group, or no group, moves on; a refused task is replaced
    for the whole group; a group is new again after ``GROUP_TTL_S`` (a row's next epoch), and
    the oldest groups are forgotten past ``GROUPS_KEPT``."""
    dataset = ProceduralDataset(3, cache_dir=tmp_path / "cache")
    curriculum = Curriculum(0.5, tmp_path, dataset)
    first = [curriculum.pick("g", "train", "step-0")[0] for _ in range(4)]
    assert len(set(first)) == 1
    other = curriculum.pick("g", "train", "step-1")[0]
    loose = curriculum.pick("g", "train")[0]
    assert len({first[0], other, loose}) == 3
    index, why = curriculum.pick("g", "train", "step-0", frozenset({first[0]}))
    assert index != first[0] and why["curriculum_group"] == "step-0"
    assert curriculum.pick("g", "train", "step-0")[0] == index  # the group's task is now it
    monkeypatch.setattr(curriculum_rules, "GROUP_TTL_S", 0.0)
    assert curriculum.pick("g", "train", "step-0")[0] != index  # the next epoch's reset
    monkeypatch.setattr(curriculum_rules, "GROUP_TTL_S", 600.0)
    monkeypatch.setattr(curriculum_rules, "GROUPS_KEPT", 4)
    for n in range(4):
        curriculum.pick("g", "train", f"later-{n}")
    assert curriculum.pick("g", "train", "step-1")[0] != other  # forgotten, a new task


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.2, 3])
def test_target_outside_zero_one_is_refused(bad):
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        check_target(bad)
