"""``loop_bridge``: blocking code run on the event loop's thread, yielding where it waits."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import socket
import threading
import time

import pytest

from analyst_env.envs.loop_bridge import (
    cooperative,
    offload,
    run_cooperatively,
    wait_future,
    wait_readable,
)

REQUEST = contextvars.ContextVar("REQUEST", default="none")


def test_waits_on_sockets_yield_so_one_thread_serves_many_callers():
    pairs = [socket.socketpair() for _ in range(3)]
    woke: list[int] = []

    def wait_then_read(i: int) -> tuple[str, bytes]:
        assert cooperative()
        assert wait_readable(pairs[i][0].fileno(), 10)
        woke.append(i)
        return threading.current_thread().name, pairs[i][0].recv(16)

    async def main():
        loop_thread = threading.current_thread().name
        callers = [asyncio.ensure_future(run_cooperatively(wait_then_read, i)) for i in range(3)]
        await asyncio.sleep(0.05)
        for i in (2, 0, 1):  # answered out of order: each caller wakes when its socket does
            pairs[i][1].send(f"r{i}".encode())
            await asyncio.sleep(0.05)
        results = await asyncio.gather(*callers)
        assert [thread for thread, _ in results] == [loop_thread] * 3
        assert [data for _, data in results] == [b"r0", b"r1", b"r2"]
        assert woke == [2, 0, 1]
        for a, _ in pairs:  # no registration outlives its wait
            with pytest.raises(KeyError):
                asyncio.get_running_loop()._selector.get_key(a.fileno())  # type: ignore[attr-defined]

    asyncio.run(main())
    for a, b in pairs:
        a.close()
        b.close()


def test_a_wait_times_out_and_a_closed_peer_counts_as_readable():
    a, b = socket.socketpair()

    def waits() -> tuple[bool, bool]:
        quiet = wait_readable(a.fileno(), 0.1)
        b.close()
        return quiet, wait_readable(a.fileno(), 5)

    assert asyncio.run(run_cooperatively(waits)) == (False, True)
    assert not cooperative()
    assert wait_readable(a.fileno(), 0.01)  # on a plain thread it polls
    a.close()


def test_offload_runs_blocking_work_on_a_thread_while_the_loop_goes_on():
    ticks: list[float] = []

    def blocking() -> str:
        return offload(lambda: (time.sleep(0.3), REQUEST.get(), threading.current_thread().name))

    async def main():
        REQUEST.set("req-7")

        async def heartbeat():
            for _ in range(5):
                ticks.append(time.monotonic())
                await asyncio.sleep(0.04)

        beat = asyncio.ensure_future(heartbeat())
        _, seen, thread = await run_cooperatively(blocking)
        await beat
        return seen, thread

    seen, thread = asyncio.run(main())
    assert seen == "req-7", "context variables reach the offloaded call"
    assert thread.startswith("analyst-offload")
    assert len(ticks) == 5 and ticks[-1] - ticks[0] < 0.3, "the loop ran during the offload"
    assert offload(lambda: threading.current_thread().name) == threading.current_thread().name


def test_wait_future_times_out_without_cancelling_the_future():
    future: concurrent.futures.Future[int] = concurrent.futures.Future()

    def waits() -> int:
        with pytest.raises(TimeoutError):
            wait_future(future, 0.05)
        threading.Timer(0.05, future.set_result, (42,)).start()
        return wait_future(future, 5)

    assert asyncio.run(run_cooperatively(waits)) == 42
    assert not future.cancelled()


def test_errors_propagate_and_a_cancelled_caller_does_not_cut_the_call_short():
    finished = threading.Event()
    a, b = socket.socketpair()

    def fails():
        raise ValueError("boom")

    def slow():
        wait_readable(a.fileno(), 0.2)
        finished.set()

    async def main():
        with pytest.raises(ValueError, match="boom"):
            await run_cooperatively(fails)
        caller = asyncio.ensure_future(run_cooperatively(slow))
        await asyncio.sleep(0.05)
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        await asyncio.sleep(0.4)

    asyncio.run(main())
    assert finished.is_set(), "the call ran to its end although its caller was cancelled"
    a.close()
    b.close()


def test_many_offloads_run_at_once():
    """A few slow offloads (scorings) must not queue every other session's behind them."""
    together = threading.Barrier(40, timeout=20)  # broken unless all 40 run at the same time

    async def main():
        await asyncio.gather(*(run_cooperatively(offload, together.wait) for _ in range(40)))

    asyncio.run(main())
    assert not together.broken
