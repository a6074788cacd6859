"""A reset by seed alone draws a procedural task from ``train``; ``test`` and ``ood`` only when
the reset names them.

The three splits are equally long, so a draw over all of them handed a training reset a
held-out task two times in three (``reset(seed=3)`` on ``procedural:7`` gave an ``ood`` task).
"""

from __future__ import annotations

import random

import pytest

from analyst_env.datasets.procedural import ProceduralDataset
from analyst_env.server.runtime import Runtime
from analyst_env.verifiers.recalc import needs_recalculation


@pytest.fixture(scope="module")
def served(settings, runtime, tiny_dataset, tmp_path_factory) -> Runtime:
    procedural = ProceduralDataset(7, cache_dir=tmp_path_factory.mktemp("draw"), keep_dirs=64)
    return Runtime(settings, backend=runtime.backend, datasets=[tiny_dataset, procedural])


def test_a_reset_by_seed_alone_draws_from_train(served):
    drawn = [served.select(task_id=None, split=None, index=None, seed=s) for s in range(8)]
    assert {t.split for t in drawn} == {"train"}
    assert all(t.id.startswith("procedural-train-") for t in drawn)
    assert len({t.id for t in drawn}) == 8  # still a draw, not one fixed task


def test_a_held_out_split_is_drawn_when_the_reset_names_it(served):
    for split in ("test", "ood"):
        task = served.select(task_id=None, split=split, index=None, seed=3)
        assert task.split == split and task.id.startswith(f"procedural-{split}-")


def test_without_libreoffice_a_seed_draw_steps_over_workbook_tasks(served, monkeypatch, tmp_path):
    # Procedural tasks are made on demand, so a workbook task drawn where nothing can
    # recalculate its formulas is stepped over, not handed out and not an error.
    monkeypatch.setenv("ANALYST_ENV_SOFFICE", str(tmp_path / "no-soffice"))
    pool = served.all_tasks()
    seeds = range(60)
    first = {s: pool[random.Random(s).randrange(len(pool))] for s in seeds}
    books = [s for s in seeds if needs_recalculation(first[s])]
    assert books, "no seed drew a workbook task first: the test would prove nothing"
    for s in seeds:
        task = served.select(task_id=None, split=None, index=None, seed=s)
        assert not needs_recalculation(task), (s, task.id)
        assert (task.id == first[s].id) == (s not in books)
    assert served.select(task_id=None, split=None, index=None, seed=books[0]).id == (
        served.select(task_id=None, split=None, index=None, seed=books[0]).id
    )
