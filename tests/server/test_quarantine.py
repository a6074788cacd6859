"""Quarantined tasks (a broken upstream gold) are never drawn by a reset, nor played by eval.

A loader records the evidence in ``metadata["gold_status"]`` (a gold query that fails,
reference values that contradict the task). A reward computed against such a gold
trains or grades against a wrong answer, so resets by seed or by (split, index) skip
them, unless the operator asks for them; by ``task_id`` they are still served.
"""

from __future__ import annotations

import pytest

from analyst_env.client.evaluation.run import select_tasks
from analyst_env.datasets import Dataset
from analyst_env.server.environment import AnalystEnvironment
from analyst_env.server.runtime import Runtime, TaskNotFoundError

BROKEN = "error: no such column: total"


@pytest.fixture(scope="module")
def dataset(tiny_dataset) -> Dataset:
    csv = tiny_dataset.tasks[0]
    tasks = [csv.model_copy(update={"id": f"good-{i}", "split": "test"}) for i in range(3)] + [
        csv.model_copy(
            update={"id": f"broken-{i}", "split": split, "metadata": {"gold_status": BROKEN}}
        )
        for i, split in enumerate(["test", "test", "held"])
    ]
    return Dataset(name="mixed", tasks=tasks)


def runtime_for(settings, runtime, dataset, **overrides) -> Runtime:
    return Runtime(
        settings.model_copy(update=overrides), backend=runtime.backend, datasets=[dataset]
    )


def test_resets_by_seed_or_index_never_draw_a_quarantined_task(settings, runtime, dataset):
    served = runtime_for(settings, runtime, dataset)
    drawn = {served.select(task_id=None, split=None, index=None, seed=s).id for s in range(200)}
    assert drawn == {"good-0", "good-1", "good-2"}
    by_index = [served.select(task_id=None, split="test", index=i, seed=None).id for i in range(3)]
    assert by_index == ["good-0", "good-1", "good-2"]
    with pytest.raises(IndexError):
        served.select(task_id=None, split="test", index=3, seed=None)
    assert [t.id for t in served.quarantined] == ["broken-0", "broken-1", "broken-2"]
    assert len(served.tasks) == 6  # still listed (/web, the task catalogue)


def test_a_quarantined_task_is_served_by_its_id(settings, runtime, dataset):
    served = runtime_for(settings, runtime, dataset)
    task = served.select(task_id="broken-1", split=None, index=None, seed=None)
    assert task.quarantine_reason == BROKEN
    env = AnalystEnvironment(served)
    try:
        first = env.reset(task_id="broken-1")
        assert not first.done and first.metadata["quarantined"] is True
        assert BROKEN not in str(first.metadata)  # the evidence may quote the gold
    finally:
        env.close()


def test_a_split_with_only_quarantined_tasks_says_so(settings, runtime, dataset):
    served = runtime_for(settings, runtime, dataset)
    assert "held" in served.splits()
    with pytest.raises(TaskNotFoundError, match="1 task\\(s\\) are quarantined.*task_id"):
        served.select(task_id=None, split="held", index=None, seed=1)


def test_the_operator_can_let_resets_draw_them(settings, runtime, dataset):
    served = runtime_for(settings, runtime, dataset, serve_quarantined=True)
    drawn = {served.select(task_id=None, split=None, index=None, seed=s).id for s in range(200)}
    assert drawn == {t.id for t in dataset.tasks}
    assert served.select(task_id=None, split="held", index=0, seed=None).id == "broken-2"


def test_eval_skips_quarantined_tasks_unless_asked(dataset):
    assert [t.id for t in select_tasks(dataset.tasks, "test", None)] == [
        "good-0",
        "good-1",
        "good-2",
    ]
    assert [t.id for t in select_tasks(dataset.tasks, "test", 2)] == ["good-0", "good-1"]
    assert len(select_tasks(dataset.tasks, "test", None, include_quarantined=True)) == 5
    with pytest.raises(ValueError, match="all 1 task\\(s\\) are quarantined"):
        select_tasks(dataset.tasks, "held", None)
