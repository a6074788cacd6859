"""A kernel sees no host cgroup tree: not this server's, not another server's, not its siblings'.

``/sys/fs/cgroup`` names every server's cgroups on the host (``analyst-env-<pid>-...``,
with their slot uids and the pids inside). Two servers run side by side here, so
there is a neighbour to find; each mode's kernel lists ``/sys/fs/cgroup`` and reads
what it can, and must find none of either server's names. Its own ``/proc/self/cgroup``
(its own path) stays readable, and DuckDB, which reads its CPU quota from the tree,
still works.
"""

from __future__ import annotations

import json
import os

import pytest

from analyst_env.envs.local import LocalSandboxBackend, landlock

ROOT = os.geteuid() == 0
pytestmark = pytest.mark.skipif(not ROOT, reason="cgroups and per-slot uids need root")

LOOK = """
import json, os
seen = []
try:
    for top, dirs, files in os.walk('/sys/fs/cgroup'):
        seen += [os.path.join(top, d) for d in dirs]
        if len(seen) > 5000:
            break
    listing = sorted(os.listdir('/sys/fs/cgroup'))
except OSError as exc:
    listing = type(exc).__name__
own = open('/proc/self/cgroup').read()
named = [p for p in seen if 'analyst-env-' in p][:5]
import duckdb  # reads its CPU quota from the cgroup tree at start: must still work
works = duckdb.connect().sql('select 42').fetchall()[0][0]
print(json.dumps({'listing': listing, 'walked': len(seen), 'named': named, 'own': bool(own),
                  'duckdb': works}))
"""


def look(backend: LocalSandboxBackend) -> dict:
    sandbox = backend.start("default", files={})
    try:
        result = sandbox.run_cell(LOOK, timeout_s=30)
        assert result.error is None, result.error
        return json.loads(result.stdout)
    finally:
        sandbox.close()


@pytest.fixture(scope="module")
def neighbour():
    """Another server's backend on the host, with a live episode in its cgroups."""
    other = LocalSandboxBackend(standbys=0)
    episode = other.start("default", files={})
    assert episode.run_cell("1", timeout_s=30).error is None
    yield other
    episode.close()
    other.close()


def test_the_host_sees_the_neighbours_cgroups(neighbour) -> None:
    """The premise: on the host, the tree does name the neighbour's cgroups."""
    found = [
        top
        for top, dirs, _ in os.walk("/sys/fs/cgroup")
        for d in dirs
        if d.startswith(f"analyst-env-{os.getpid()}-")
    ]
    assert found, "the neighbour made no cgroup the host can see"


@pytest.mark.parametrize("mode", ["full", "userns", "landlock"])
def test_a_kernel_lists_no_cgroup_of_any_server(neighbour, mode: str) -> None:
    if mode == "landlock" and landlock.abi() < 6:
        pytest.skip("no Landlock ABI 6 on this kernel")
    backend = LocalSandboxBackend(isolation=mode, standbys=0, per_process_limits=mode != "full")
    try:
        assert backend.protections()["cgroup_tree_hidden"] is True
        seen = look(backend)
        assert seen["named"] == [], f"{mode}: a kernel saw servers' cgroups: {seen['named']}"
        assert seen["walked"] == 0, seen
        assert seen["listing"] in ([], "PermissionError"), f"{mode}: /sys/fs/cgroup: {seen}"
        assert seen["own"] is True and seen["duckdb"] == 42
        assert "no host cgroup tree" in str(backend.protections()["verified"])
    finally:
        backend.close()
