"""Quarantined tasks (a broken upstream gold) are never drawn by a reset, nor played by eval,
nor exported; and a server that cannot score a task (a workbook task without LibreOffice)
refuses it, with the reason.

A loader records the evidence in ``metadata["gold_status"]`` (a gold query that fails,
reference values that contradict the task). A reward computed against such a gold
trains or grades against a wrong answer, so resets by seed or by (split, index) skip
them, unless the operator asks for them; by ``task_id`` they are still served.
"""

from __future__ import annotations

import pytest
from sheetcopilot_layout import write_heldout_shapes

from analyst_env import cli
from analyst_env.datasets import Dataset, load_dataset
from analyst_env.evaluation.run import select_tasks
from analyst_env.server.environment import AnalystEnvironment
from analyst_env.server.runtime import Runtime, TaskNotFoundError, TaskUnavailableError
from analyst_env.server.web.routes import _task_detail, _task_row
from analyst_env.task_format import VerifierSpec

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


# ── one decision, made at load, honoured by every user ──────────────────────────
@pytest.fixture(scope="module")
def heldout_root(tmp_path_factory):
    return write_heldout_shapes(tmp_path_factory.mktemp("sheetcopilot"))


def test_a_task_its_initial_state_solves_is_held_back_everywhere(
    settings, runtime, heldout_root, tmp_path, capsys
):
    """FutureValue-4's shape: doing nothing scores 1, so draws, eval, export and /web skip it."""
    dataset = load_dataset(f"sheetcopilot:{heldout_root}")
    solved, sound = "sheetcopilot-FutureValue-4", "sheetcopilot-PeriodRate-4"
    served = runtime_for(settings, runtime, dataset)
    drawn = {served.select(task_id=None, split=None, index=None, seed=s).id for s in range(50)}
    assert drawn == {sound}
    assert [t.id for t in select_tasks(dataset.tasks, None, None)] == [sound]
    rows = {row["id"]: row["quarantined"] for row in map(_task_row, served.tasks)}
    assert rows == {solved: True, sound: False}
    detail = _task_detail(served.task(solved))  # the task page flags it and says why
    assert detail["quarantined"].startswith("solved by its initial state")
    assert _task_detail(served.task(sound))["quarantined"] is None
    out = tmp_path / "harbor"
    spec = f"sheetcopilot:{heldout_root}"
    args = ["export", "harbor", "--dataset", spec, "--out", str(out)]
    assert cli.main([*args, "--grader-requirement", "analyst-env"]) == 0
    assert sorted(p.name for p in (out / "tasks").iterdir()) == [sound]
    assert "skipped 1 quarantined task(s)" in capsys.readouterr().err


# ── workbook tasks where nothing can recalculate ───────────────────────────────
@pytest.fixture
def no_soffice(monkeypatch, tmp_path):
    monkeypatch.setenv("ANALYST_ENV_SOFFICE", str(tmp_path / "no-soffice"))


def test_without_libreoffice_workbook_tasks_are_refused_with_the_reason(
    settings, runtime, tiny_dataset, no_soffice
):
    csv = tiny_dataset.tasks[0]
    book = csv.model_copy(
        update={"id": "book-0", "split": "books", "verifier": VerifierSpec(name="workbook_match")}
    )
    served = runtime_for(settings, runtime, Dataset(name="books", tasks=[csv.model_copy(), book]))
    assert [t.id for t in served.refused] == ["book-0"]
    drawn = {served.select(task_id=None, split=None, index=None, seed=s).id for s in range(50)}
    assert drawn == {csv.id}
    with pytest.raises(TaskUnavailableError, match="LibreOffice \\(soffice\\) is not installed"):
        served.select(task_id="book-0", split=None, index=None, seed=None)
    with pytest.raises(TaskUnavailableError, match="no task in split 'books' can be drawn"):
        served.select(task_id=None, split="books", index=None, seed=1)
