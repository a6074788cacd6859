"""The generated-task cache (datasets/cache.py): built once, atomically, damage reported."""

import threading

import pytest

from analyst_env.datasets.cache import MANIFEST, materialize


def write_set(directory, calls):
    calls.append(directory)
    (directory / "data.csv").write_text("a\n1\n")
    (directory / MANIFEST).write_text("{}")


def test_a_set_is_built_once_and_then_read_from_the_cache(tmp_path):
    calls = []
    final = tmp_path / "set-v1"
    assert materialize(final, lambda d: write_set(d, calls)) == final
    assert materialize(final, lambda d: write_set(d, calls)) == final
    assert len(calls) == 1 and (final / "data.csv").read_text() == "a\n1\n"
    assert [p.name for p in tmp_path.iterdir()] == ["set-v1"], "a temporary folder was left"


def test_builders_racing_for_one_set_leave_one_complete_copy(tmp_path):
    final, calls, gate = tmp_path / "set-v1", [], threading.Barrier(4)

    def build(directory):
        gate.wait(timeout=10)  # all four are mid-build before any renames into place
        write_set(directory, calls)

    threads = [threading.Thread(target=materialize, args=(final, build)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 4 and (final / MANIFEST).is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["set-v1"]


def test_a_damaged_cache_is_named_not_served(tmp_path):
    broken = tmp_path / "set-v1"
    broken.mkdir()
    (broken / "data.csv").write_text("half-written")
    with pytest.raises(RuntimeError, match="damaged dataset cache .*set-v1: delete it"):
        materialize(broken, lambda d: write_set(d, []))


def test_a_failed_build_leaves_nothing_behind(tmp_path):
    def fail(directory):
        (directory / "data.csv").write_text("partial")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        materialize(tmp_path / "set-v1", fail)
    assert list(tmp_path.iterdir()) == []
