"""Kernel orders: ``start()`` answers before the kernel exists, and the first call waits for it.

Real zygote, real kernels. A test that must see an order still open holds the zygotes' lock
(every fork takes it), so no worker can fill the order until the test lets go.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import pytest
from support import wait_dead

from analyst_env.envs.local import LocalSandboxBackend
from analyst_env.envs.local.isolation import Sizing
from analyst_env.envs.sandbox import SandboxClosedError, SandboxStartError


@pytest.fixture(scope="module")
def cold() -> Iterator[LocalSandboxBackend]:
    """A backend with no standbys: every start is an order filled by a fork, and every slot in
    use is an episode's (or one still being torn down)."""
    backend = LocalSandboxBackend(standbys=0, sizing=Sizing(disk_mb=2))
    backend.warm_up()
    yield backend
    backend.close()


@contextlib.contextmanager
def forks_held(backend: LocalSandboxBackend) -> Iterator[None]:
    """No kernel can be forked while this holds the zygotes' lock."""
    with backend._zygotes._lock:
        yield


def wait_until(predicate, timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def test_start_answers_before_any_fork_and_the_first_call_waits(cold, tmp_path) -> None:
    data = tmp_path / "data.csv"
    data.write_text("a\n1\n2\n")
    with forks_held(cold):
        started = time.monotonic()
        sandbox = cold.start("default", files={"data.csv": str(data)}, seed=3)
        # the forks are held until the block ends: a start() that waited would never return
        assert time.monotonic() - started < 10, "start() must not wait for a fork"
        assert sandbox._socket_link.order.placement is None
        result: dict = {}
        caller = threading.Thread(
            target=lambda: result.update(
                cell=sandbox.run_cell(
                    "import pandas as pd, random\n(int(pd.read_csv('data.csv').a.sum()), "
                    "random.random())",
                    timeout_s=0.5,  # shorter than the wait below: the wait must not count
                )
            )
        )
        caller.start()
        time.sleep(1.0)
        assert caller.is_alive(), "the first call waits while no kernel can be forked"
    caller.join(timeout=30)
    try:
        cell = result["cell"]
        assert cell.success, cell
        value = cell.outputs[0]["text/plain"]
        assert value.startswith("(3, ")
        seeded = cold.start("default", files={}, seed=3)
        try:
            again = seeded.run_cell("import random\nrandom.random()", timeout_s=10)
            assert again.outputs[0]["text/plain"] in value, "the order's seed reaches the kernel"
        finally:
            seeded.close()
    finally:
        sandbox.close()


def test_a_burst_of_orders_gets_one_kernel_each(cold) -> None:
    sandboxes = []
    with forks_held(cold):
        for i in range(24):
            sandboxes.append(cold.start("default", files={}, seed=i))
        assert cold.kernels_on_order() == 24  # what /metrics shows as kernels on order
    try:
        results: list = [None] * len(sandboxes)

        def first_cell(i: int) -> None:
            results[i] = sandboxes[i].run_cell(f"mine = {i}\nimport os\nos.getpid()", timeout_s=30)

        threads = [threading.Thread(target=first_cell, args=(i,)) for i in range(len(sandboxes))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert all(r is not None and r.success for r in results), results
        assert len({s.kernel_pid for s in sandboxes}) == len(sandboxes)
        assert len({s.workdir for s in sandboxes}) == len(sandboxes)
        for i, sandbox in enumerate(sandboxes):
            assert sandbox.run_cell("mine", timeout_s=10).outputs[0]["text/plain"] == str(i)
        assert cold.kernels_on_order() == 0
    finally:
        for sandbox in sandboxes:
            sandbox.close()


def test_closing_before_the_kernel_arrives_leaves_nothing(cold) -> None:
    with forks_held(cold):
        sandboxes = [cold.start("default", files={}) for _ in range(6)]
        waiter_error: list[BaseException] = []

        def waiting_call() -> None:
            try:
                sandboxes[0].run_cell("1", timeout_s=30)
            except BaseException as exc:
                waiter_error.append(exc)

        waiter = threading.Thread(target=waiting_call)
        waiter.start()
        time.sleep(0.3)
        for sandbox in sandboxes:
            sandbox.close()  # also wakes the call waiting for its kernel
        waiter.join(timeout=10)
        assert not waiter.is_alive()
        assert isinstance(waiter_error[0], SandboxClosedError)
    # Orders abandoned in the queue are dropped; one a worker had begun is torn down.
    assert wait_until(lambda: cold._slots.in_use == 0 and cold.kernels_on_order() == 0)
    with pytest.raises(SandboxClosedError):
        sandboxes[1].run_cell("1", timeout_s=5)


def test_a_kernel_that_arrives_after_close_is_torn_down(cold) -> None:
    """Close while a worker is forking: the kernel it delivers late is killed."""
    forked: list[int] = []
    original = cold._spawn

    def slow_spawn(image: str, *, warm: bool):
        placed = original(image, warm=warm)
        forked.append(placed[0].pid)
        time.sleep(0.5)  # the sandbox is closed meanwhile
        return placed

    cold._spawn = slow_spawn  # type: ignore[method-assign]
    try:
        sandbox = cold.start("default", files={})
        assert wait_until(lambda: forked, timeout_s=10)
        sandbox.close()
        assert wait_until(lambda: cold._slots.in_use == 0)
        assert wait_dead(forked[0])
    finally:
        del cold._spawn


def test_an_order_that_cannot_be_filled_fails_the_first_call_clearly(cold, tmp_path) -> None:
    big = tmp_path / "big.csv"
    big.write_bytes(b"x" * (3 * 1024 * 1024))  # over the slots' 2 MiB disk
    sandbox = cold.start("default", files={"big.csv": str(big)})
    try:
        with pytest.raises(SandboxStartError, match="could not be started.*task files"):
            sandbox.run_cell("1", timeout_s=10)
        with pytest.raises(SandboxStartError):
            sandbox.run_shell("true", timeout_s=10)  # every later call says the same
    finally:
        sandbox.close()
    assert wait_until(lambda: cold._slots.in_use == 0)
    healthy = cold.start("default", files={})
    try:
        assert healthy.run_cell("1 + 1", timeout_s=10).outputs == [{"text/plain": "2"}]
    finally:
        healthy.close()


def test_closing_the_backend_fails_open_orders(tmp_path) -> None:
    backend = LocalSandboxBackend(standbys=0)
    backend.warm_up()
    with forks_held(backend):
        sandbox = backend.start("default", files={})
        closer = threading.Thread(target=backend.close)
        closer.start()
        time.sleep(0.3)
    closer.join(timeout=60)
    assert not closer.is_alive()
    with pytest.raises((SandboxClosedError, SandboxStartError)):
        sandbox.run_cell("1", timeout_s=5)
