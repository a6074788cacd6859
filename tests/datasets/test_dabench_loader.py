"""DABench loader against the shared benchmark copy (skipped when absent)."""

import os

import pytest

from analyst_env.datasets.dabench import load_dabench
from analyst_env.verifiers import score

pytestmark = pytest.mark.dataset


def test_loads_all_shared_questions(dabench_dir):
    ds = load_dabench(dabench_dir)
    assert len(ds.tasks) == 120
    assert len({t.id for t in ds.tasks}) == 120
    assert ds.splits() == ["dev"]


def test_task_shape(dabench_dir):
    t = load_dabench(dabench_dir).by_id()["dabench-0"]
    assert t.files == {
        "test_ave.csv": str(dabench_dir.resolve() / "da-dev-tables" / "test_ave.csv")
    }
    assert t.answer == [["mean_fare", "34.65"]]
    assert t.oracle_answer == "@mean_fare[34.65]"
    assert t.verifier.name == "dabench"
    assert t.metadata["source"] == "dabench" and t.metadata["kind"] == "csv"
    assert "@mean_fare[" in t.instruction and "test_ave.csv" in t.instruction
    assert "34.65" not in t.instruction


def test_every_oracle_scores_one_and_empty_zero(dabench_dir):
    for t in load_dabench(dabench_dir).tasks:
        assert score(t.verifier, t.oracle_answer, t.answer) == 1.0, t.id
        assert score(t.verifier, "", t.answer) == 0.0, t.id
        assert all(os.path.isfile(p) for p in t.files.values()), t.id


def test_missing_folder_raises(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_dabench(tmp_path)


def test_a_label_that_contradicts_itself_is_quarantined(tmp_path):
    import json

    (tmp_path / "da-dev-tables").mkdir()
    (tmp_path / "da-dev-tables" / "t.csv").write_text("a\n1\n")
    questions = [
        {
            "id": i,
            "question": "q",
            "concepts": [],
            "constraints": "",
            "format": "@n[value]",
            "file_name": "t.csv",
            "level": "easy",
        }
        for i in (1, 2)
    ]
    labels = [
        {"id": 1, "common_answers": [["n", "3"], ["n", "4"]]},
        {"id": 2, "common_answers": [["n", "3"], ["n", "3.0"]]},
    ]
    (tmp_path / "da-dev-questions.jsonl").write_text(
        "".join(json.dumps(q) + "\n" for q in questions)
    )
    (tmp_path / "da-dev-labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in labels))
    tasks = {t.id: t for t in load_dabench(tmp_path).tasks}
    assert (
        tasks["dabench-1"].metadata["gold_status"]
        == "label contradicts itself: n is both '3' and '4'"
    )
    assert tasks["dabench-2"].metadata["gold_status"] == "ok"
