"""Blocking sandbox calls run on the server's event loop, with no thread per session.

A step is ordinary blocking code: a tool calls the sandbox policy, which sends a request
to the kernel and waits for its reply. Run on a thread per session, 256 sessions stepping
at once were 256 threads waking for the GIL in no particular order: the server's CPU per
step tripled and the slowest steps waited ~4x the median (docs/benchmarks-history.md,
"Where the 256-client step tail comes from").

``run_cooperatively(fn)`` runs that same code in a greenlet on the event loop's thread.
Where it would block, it yields to the loop instead and is resumed when it can go on:

* ``wait_readable(fd, timeout_s)``: a kernel's socket has a reply (``frame_socket``);
* ``wait_future(future, timeout_s)``: another thread delivers a result (a kernel order);
* ``offload(fn)``: blocking work with no descriptor to wait on (a scoring child, a kernel
  restart, a user's hook) runs on a thread meanwhile (``offload_if``: only when it blocks).

Outside such a greenlet the three block as before, so one implementation serves the
server's loop, worker threads and the in-process Gymnasium environment. Code run this
way must not hold a lock that code on the loop's thread may take (a greenlet that waits
keeps what it holds): the environment serialises each session's calls before it enters.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import greenlet

from analyst_env.envs.frame_socket import poll_readable

T = TypeVar("T")


class _Bridged(greenlet.greenlet):
    """A greenlet started by ``run_cooperatively``: it yields awaitables to its driver."""

    def __init__(self, fn: Callable[..., Any], driver: greenlet.greenlet) -> None:
        super().__init__(fn, driver)
        self.driver = driver
        self.gr_context = driver.gr_context  # the caller's context variables


class YieldsToLoop:
    """Base of a sandbox whose every wait goes through this module's primitives (the local
    backend's: a kernel's socket, a kernel order), so its calls may run inside
    ``run_cooperatively`` on the event loop's thread. The server makes any other
    sandbox's calls from a worker thread, where they may block."""

    __slots__ = ()


def cooperative() -> bool:
    """Whether the caller runs inside ``run_cooperatively`` (its waits yield to the loop)."""
    return isinstance(greenlet.getcurrent(), _Bridged)


async def run_cooperatively(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run ``fn(*args, **kwargs)`` on this thread, yielding to the loop wherever it waits.

    Cancelling the caller does not cancel ``fn``: like a call handed to a thread, it runs
    to its end (a kernel's reply arriving after a half-finished call would be read by the
    next one), and its outcome is dropped.
    """
    task = asyncio.ensure_future(_drive(fn, args, kwargs))
    task.add_done_callback(_retrieve)
    return await asyncio.shield(task)


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # an outcome nobody awaits any more is not "never retrieved"


async def _drive(fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
    bridged = _Bridged(fn, greenlet.getcurrent())
    request = bridged.switch(*args, **kwargs)
    while not bridged.dead:
        try:
            value = await request
        except BaseException:  # delivered where the greenlet waits, as a blocking call raises it
            request = bridged.throw(*sys.exc_info())
        else:
            request = bridged.switch(value)
    return request


def _await(awaitable: Awaitable[T]) -> T:
    """Suspend the current bridged greenlet until ``awaitable`` is done on the loop."""
    current = greenlet.getcurrent()
    assert isinstance(current, _Bridged)
    return current.driver.switch(awaitable)


def wait_readable(fd: int, timeout_s: float) -> bool:
    """Wait up to ``timeout_s`` for ``fd`` to be readable (or closed by its peer): yield to
    the loop inside ``run_cooperatively``, else block the thread (``poll_readable``)."""
    if cooperative():
        return _await(_readable(fd, timeout_s))
    return poll_readable(fd, timeout_s)


async def _readable(fd: int, timeout_s: float) -> bool:
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[bool] = loop.create_future()

    def settle(value: bool) -> None:
        if not ready.done():
            ready.set_result(value)

    loop.add_reader(fd, settle, True)
    timer = loop.call_later(max(0.0, timeout_s), settle, False)
    try:
        return await ready
    finally:
        timer.cancel()
        loop.remove_reader(fd)  # before the caller can close fd: never a stale registration


def wait_future(future: concurrent.futures.Future[T], timeout_s: float) -> T:
    """``future.result(timeout_s)``, yielding to the loop meanwhile when cooperative.

    Raises:
        TimeoutError: Not done within ``timeout_s``.
        Exception: What the future raised.
    """
    if not cooperative():
        return future.result(timeout_s)
    # shielded: a timeout here must not cancel the future for everyone else
    return _await(asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), timeout_s))


OFFLOAD_THREADS = 256
"""Threads ``offload`` may run at once (made as needed). asyncio's default pool has
``cpus + 4``: six slow scorings there would hold up every session's kernel restart."""


@functools.cache
def _offload_pool() -> concurrent.futures.ThreadPoolExecutor:
    return concurrent.futures.ThreadPoolExecutor(
        OFFLOAD_THREADS, thread_name_prefix="analyst-offload"
    )


def offload(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run ``fn`` on a thread if the caller is cooperative (the loop goes on meanwhile);
    otherwise just call it."""
    if not cooperative():
        return fn(*args, **kwargs)
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    return _await(asyncio.get_running_loop().run_in_executor(_offload_pool(), call))


def offload_if(blocks: bool, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``offload(fn, ...)`` if ``blocks``, else call ``fn`` here (it does not block, or it
    yields to the loop itself)."""
    return offload(fn, *args, **kwargs) if blocks else fn(*args, **kwargs)
