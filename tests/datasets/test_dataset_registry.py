"""Dataset spec parsing: shipped names, FORMAT:PATH, and clear errors."""

import os

import pytest

from analyst_env.datasets import known_datasets, load_dataset


def test_known_datasets():
    known = known_datasets()
    assert "dabench" in known["formats"] and "starter" in known["shipped"]


@pytest.mark.parametrize("spec", ["nope:/x", "spider-ish:foo"])
def test_unknown_format(spec):
    hint = "known formats: dabench.*procedural \\(SEED\\); shipped sets: .*starter"
    with pytest.raises(ValueError, match=hint):
        load_dataset(spec)


def test_unknown_name():
    with pytest.raises(ValueError, match="FORMAT:PATH or a shipped set name"):
        load_dataset("no_such_set")


def test_empty_path():
    with pytest.raises(ValueError, match="no path"):
        load_dataset("dabench:")


def test_shipped_by_name(starter):
    ds = load_dataset("starter")
    assert ds.name == "starter" and [t.id for t in ds.tasks] == [t.id for t in starter.tasks]


@pytest.mark.dataset
def test_relative_path_resolved_against_cwd(monkeypatch, dabench_dir):
    monkeypatch.chdir(dabench_dir.parent)
    ds = load_dataset("dabench:dabench")
    assert len(ds.tasks) == 120
    assert all(os.path.isabs(p) for t in ds.tasks for p in t.files.values())
