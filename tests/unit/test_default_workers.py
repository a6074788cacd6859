"""How many workers ``serve`` starts without ``--workers``: one per core it may use, up to 8."""

import pytest

from analyst_env.server import workers


@pytest.mark.parametrize(
    ("cores", "quota", "expected"),
    [(2, None, 2), (1, None, 1), (64, None, 8), (64, 2.0, 2), (64, 1.5, 2), (4, 0.5, 1)],
)
def test_one_worker_per_core_the_container_may_use(monkeypatch, cores, quota, expected):
    monkeypatch.setattr(workers.os, "sched_getaffinity", lambda pid: set(range(cores)))
    monkeypatch.setattr(workers, "_cgroup_cpu_quota", lambda: quota)
    assert workers.default_workers() == expected
