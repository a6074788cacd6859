"""Cgroups left by a server that died without closing its backend are swept by the next one."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from analyst_env.envs.local import cgroups
from analyst_env.envs.local.cgroups import CgroupManager
from analyst_env.envs.local.fail_closed import Refusal

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="creating cgroups needs root")


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def cgroup_parent() -> str:
    """Where this process's backend would put its cgroups: the v2 tree, else v1 pids."""
    v2, v1 = cgroups._mounts()
    own = cgroups._own_paths()
    if v2 is not None:
        return v2 + own.get("", "/")
    if "pids" in v1:
        return v1["pids"] + own.get("pids", "/")
    pytest.skip("no cgroup tree to write to")


def test_a_new_manager_removes_a_dead_servers_cgroups_and_kills_what_is_left_in_them():
    parent = cgroup_parent()
    stale = os.path.join(parent, f"analyst-env-{dead_pid()}-test")
    slot = os.path.join(stale, "u42")
    os.makedirs(slot)
    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with open(os.path.join(slot, "cgroup.procs"), "w") as f:
            f.write(str(orphan.pid))
        live = os.path.join(parent, f"analyst-env-{os.getpid()}-live")  # ours: must stay
        os.makedirs(live, exist_ok=True)

        manager = CgroupManager(f"analyst-env-{os.getpid()}-sweeper")
        try:
            assert not os.path.exists(stale)
            assert os.path.isdir(live)
            assert orphan.wait(timeout=5) != 0, "the process left in the stale cgroup was killed"
        finally:
            manager.close()
            os.rmdir(live)
    finally:
        if orphan.poll() is None:
            orphan.kill()
        orphan.wait()
        for path in (slot, stale):
            if os.path.isdir(path):
                time.sleep(0.1)
                os.rmdir(path)


def test_servers_starting_together_all_get_their_cgroups():
    """Concurrent sweeps of the same stale directories must not cost any of them its limits."""
    import threading

    parent = cgroup_parent()
    for i in range(20):
        os.makedirs(os.path.join(parent, f"analyst-env-{dead_pid()}-race{i}", "u1"))
    managers: list[CgroupManager] = []
    barrier = threading.Barrier(6)

    def start(i: int) -> None:
        barrier.wait()
        managers.append(CgroupManager(f"analyst-env-{os.getpid()}-race-{i}"))

    threads = [threading.Thread(target=start, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert len(managers) == 6
        assert [m.failure for m in managers] == [None] * 6
        assert all(m.available() and m.describe()["cgroup_memory"] for m in managers)
        assert not [
            e
            for e in os.listdir(parent)
            if "-race" in e and not e.startswith(f"analyst-env-{os.getpid()}-")
        ]
    finally:
        for m in managers:
            m.close()


def test_a_backend_that_cannot_apply_its_limits_says_so(monkeypatch):
    from analyst_env.envs.local import LocalSandboxBackend

    def refuse(self) -> None:
        raise PermissionError(13, "Permission denied", "/sys/fs/cgroup/memory")

    monkeypatch.setattr(CgroupManager, "_detect", refuse)
    monkeypatch.delenv("ANALYST_ENV_PER_PROCESS_LIMITS", raising=False)
    for mode in ("full", "auto"):  # fail closed: no per-episode limits, no server
        with pytest.raises(Refusal, match=r"per episode cannot be enforced here \(cgroups unav"):
            LocalSandboxBackend(isolation=mode, standbys=0)
    backend = LocalSandboxBackend(isolation="auto", standbys=0, per_process_limits=True)
    try:
        protections = backend.protections()
        assert protections["cgroup_memory"] is False
        assert protections["limits"].startswith("per process (RLIMIT_AS")
        assert "cgroups unavailable" in protections["degraded"]
    finally:
        backend.close()


READ_ONLY_CGROUPS = """
import os, sys
from analyst_env.envs.local import cgroups, fail_closed
from analyst_env.envs.local import syscalls as sc
sc.unshare(sc.CLONE_NEWNS)
sc.mount(None, "/", None, sc.MS_REC | sc.MS_PRIVATE)
v2, v1 = cgroups._mounts()
for point in {*v1.values(), *([v2] if v2 else [])}:  # what a container's cgroupfs looks like
    sc.mount(None, point, None, sc.MS_REMOUNT | sc.MS_BIND | sc.MS_RDONLY)
os.environ.pop(fail_closed.PER_PROCESS_ENV, None)
from analyst_env.envs.local import LocalSandboxBackend
for mode in ("full", "auto"):
    try:
        LocalSandboxBackend(isolation=mode, standbys=0).close()
        print("STARTED", mode)
    except fail_closed.Refusal as refusal:
        print("REFUSED", refusal.line)
backend = LocalSandboxBackend(isolation="auto", standbys=0, per_process_limits=True)
print("ACCEPTED", backend.protections()["limits"])
backend.close()
"""


def test_a_read_only_cgroup_tree_refuses_the_start_unless_per_process_limits_are_accepted():
    """A container's read-only cgroupfs, for real (a mount namespace of its own): the limits
    cannot be written, so the server does not start without the operator's consent."""
    done = subprocess.run(
        [sys.executable, "-P", "-c", READ_ONLY_CGROUPS],
        capture_output=True,
        text=True,
        timeout=300,
        cwd="/",
    )
    lines = done.stdout.splitlines()
    assert len(lines) == 3, done.stdout + done.stderr[-3000:]
    for line in lines[:2]:
        assert line.startswith("REFUSED analyst-env: refusing to start: memory and pids limits")
        assert "ANALYST_ENV_PER_PROCESS_LIMITS=1" in line
    assert lines[2] == "ACCEPTED per process (RLIMIT_AS, RLIMIT_NPROC per slot uid)"
