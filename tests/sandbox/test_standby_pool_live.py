"""The local backend's standby pool: grows to the bursts it serves, then shrinks (real kernels).

An episode a burst ends is frozen, then killed once the burst is over.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

import pytest
from support import PID_NAMESPACE_OF_CELL, alive, host_pid, wait_dead

from analyst_env.envs.local import LocalSandboxBackend
from analyst_env.envs.local.standby_pool import BURST_MIN_IN_FLIGHT


def wait_for(condition: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def start_together(backend: LocalSandboxBackend, count: int) -> list:
    go = threading.Barrier(count)
    sandboxes: list = []

    def one() -> None:
        go.wait()
        sandboxes.append(backend.start("default", files={}))

    threads = [threading.Thread(target=one) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return sandboxes


def test_the_pool_grows_to_a_burst_and_is_trimmed_after_the_hold() -> None:
    # The hold outlasts the refill even on a loaded machine: a burst's size is forgotten after
    # the hold, and a pool that reached 6 only after that would never be seen at 6.
    backend = LocalSandboxBackend(standbys=1, max_standbys=6, standby_hold_s=20.0)
    try:
        backend.warm_up()
        assert wait_for(lambda: backend.standby_count() == 1, 60)
        assert backend.protections()["standbys"] == "1-6"
        sandboxes = start_together(backend, 6)
        assert len(sandboxes) == 6
        for sandbox in sandboxes:
            assert sandbox.run_cell("1 + 1", timeout_s=20).outputs == [{"text/plain": "2"}]
            sandbox.close()
        # The next burst of six finds six kernels ready ...
        assert wait_for(lambda: backend.standby_count() == 6, 60), backend.standby_count()
        # ... and once the burst is forgotten, the pool goes back to its floor.
        assert wait_for(lambda: backend.standby_count() == 1, 60), backend.standby_count()
    finally:
        backend.close()


def test_a_fixed_pool_stays_fixed() -> None:
    backend = LocalSandboxBackend(standbys=1)
    try:
        backend.warm_up()
        sandboxes = start_together(backend, 4)
        for sandbox in sandboxes:
            sandbox.close()
        assert wait_for(lambda: backend.standby_count() == 1, 60)
        time.sleep(1.0)
        assert backend.standby_count() == 1
    finally:
        backend.close()


def cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


@pytest.mark.skipif(os.geteuid() != 0, reason="freezing a slot needs its cgroups (root)")
def test_an_episode_ended_during_a_burst_stops_at_once_and_dies_after_it() -> None:
    backend = LocalSandboxBackend(standbys=0)
    try:
        if not backend.protections().get("cgroup_kill"):
            pytest.skip("no cgroup v2 tree to freeze and kill in")
        sandbox = backend.start("default", files={})
        started = sandbox.run_cell(
            "import subprocess, sys\n"
            "p = subprocess.Popen([sys.executable, '-c', 'while True: pass'], "
            "start_new_session=True)\n"
            "p.pid",
            timeout_s=20,
        )
        namespace = sandbox.run_cell(PID_NAMESPACE_OF_CELL, timeout_s=10)
        pid = host_pid(
            namespace.outputs[0]["text/plain"].strip("'"), int(started.outputs[0]["text/plain"])
        )
        time.sleep(0.3)
        assert cpu_ticks(pid) > 0  # spinning
        demand = backend._demand_of("default")
        with backend._lock:  # a batch of resets in flight: a burst is being served
            for _ in range(BURST_MIN_IN_FLIGHT):
                demand.began()
        sandbox.close()
        before = cpu_ticks(pid)
        time.sleep(0.5)
        assert alive(pid) and cpu_ticks(pid) == before  # stopped where it stood, not yet killed
        with backend._lock:  # the burst is over
            for _ in range(BURST_MIN_IN_FLIGHT):
                demand.ended()
            backend._lock.notify_all()
        assert wait_dead(pid, timeout_s=10)
    finally:
        backend.close()


def test_a_burst_that_never_ends_does_not_hold_teardowns_for_ever() -> None:
    backend = LocalSandboxBackend(standbys=0)
    try:
        sandbox = backend.start("default", files={})
        kernel_pid = sandbox.kernel_pid
        demand = backend._demand_of("default")
        with backend._lock:  # a batch of resets stuck on hung kernels
            for _ in range(BURST_MIN_IN_FLIGHT):
                demand.began()
        sandbox.close()
        assert wait_dead(kernel_pid, timeout_s=10)
    finally:
        backend.close()


def test_a_reset_never_fails_while_ended_episodes_hold_the_slots() -> None:
    """Ended episodes whose teardown waits (a burst holds it back) are torn down by the
    reset that needs their slot: every slot held by them is no reason to refuse."""
    backend = LocalSandboxBackend(standbys=0, max_slots=8)
    try:
        # a burst that holds every teardown back, however short of slots (the worst case)
        backend._hold_teardowns = lambda: True  # type: ignore[method-assign]
        for _round in range(3):  # 5 + 5 + 5 episodes through 8 slots
            sandboxes = [backend.start("default", files={}) for _ in range(5)]
            assert all(s.run_cell("1 + 1", timeout_s=20).outputs for s in sandboxes)
            for sandbox in sandboxes:
                sandbox.close()
        assert backend._slots.in_use <= 8
        del backend._hold_teardowns  # the burst is over
        with backend._lock:
            backend._lock.notify_all()
        assert wait_for(lambda: backend._slots.in_use == 0, 20), backend._slots.in_use
    finally:
        backend.close()
