"""Kernel orders: a reset that finds no standby ready does not wait for a fork.

A trainer resets its whole batch at once. With the pool empty, each reset used to
fork its kernel on its own thread, and the zygote forks one at a time (~10 ms of
CPU each here, most of it the kernel copying the zygote's page tables): the
256th reset of a burst answered after ~255 forks, and the model could not start
writing until the last one did. Nothing in a reset's observation comes from the
kernel (the instruction, file previews and tools are the server's), so the reset
now places an *order* and answers at once; the backend's workers fill orders
first come, first served, ahead of refills and teardowns, while the model writes
its first turn. The episode's first call waits for its kernel if it is not there
yet; the time it waited does not count against the call's own limit.

An order is filled at most once and ends one of three ways: delivered (the
sandbox uses the kernel), failed (the episode's next call raises
``SandboxStartError``), or abandoned (the sandbox was closed first; a kernel
that arrives afterwards is torn down by the worker that made it).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field

from analyst_env.envs.local.kernel import KernelHandle
from analyst_env.envs.local.slots import KernelSlot
from analyst_env.envs.loop_bridge import wait_future
from analyst_env.envs.sandbox import SandboxClosedError, SandboxStartError


@dataclass
class Placement:
    """A kernel running in its slot: what an episode's sandbox talks to."""

    kernel: KernelHandle
    slot: KernelSlot
    workdir: str


@dataclass(eq=False)
class KernelOrder:
    """One episode's kernel, to be forked and activated by a backend worker.

    Args:
        image: The image to fork from.
        files: The task files (names to host paths), as ``start`` got them.
        fds: Those files, opened read-only; the order owns them until filled.
        seed: The kernel's seed.
        env: The kernel's extra environment variables.
    """

    image: str
    files: dict[str, str]
    fds: list[int]
    seed: int | None
    env: dict[str, str]
    _outcome: Future[Placement] = field(default_factory=Future)
    _abandoned: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # ── the worker's side ───────────────────────────────────────────────────
    def wanted(self) -> bool:
        """Whether the kernel is still wanted (the sandbox was not closed meanwhile)."""
        with self._lock:
            return not self._abandoned

    def deliver(self, placement: Placement) -> bool:
        """Hand the kernel over; False if the order was abandoned (the caller tears it down)."""
        with self._lock:
            if self._abandoned or self._outcome.done():
                return False
            self._outcome.set_result(placement)
            return True

    def fail(self, reason: str) -> None:
        """No kernel could be made: the episode's next call raises ``SandboxStartError``."""
        with self._lock:
            if not self._outcome.done():
                self._outcome.set_exception(SandboxStartError(reason))

    def release_files(self) -> None:
        """Close the task files' descriptors (once the kernel copied them, or on giving up)."""
        fds, self.fds = self.fds, []
        for fd in fds:
            os.close(fd)

    # ── the sandbox's side ──────────────────────────────────────────────────
    @property
    def placement(self) -> Placement | None:
        """The kernel, if delivered."""
        outcome = self._outcome
        if outcome.done() and outcome.exception() is None:
            return outcome.result()
        return None

    def wait(self, timeout_s: float) -> Placement:
        """The kernel, once delivered (yielding to the event loop meanwhile when the caller
        runs cooperatively, ``loop_bridge``).

        Raises:
            SandboxStartError: The order failed, or was not filled within ``timeout_s``.
            SandboxClosedError: The order was abandoned (the sandbox was closed).
        """
        try:
            return wait_future(self._outcome, timeout_s)
        except TimeoutError:
            self.fail(f"no kernel was ready within {timeout_s:.0f} s of the reset")
            with self._lock:
                self._abandoned = True  # a kernel delivered from now on is torn down
            return self._outcome.result()  # raises what the order ended with

    def abandon(self) -> Placement | None:
        """Stop wanting the kernel (the sandbox closes); its placement if it was delivered.

        A call waiting for the kernel wakes with ``SandboxClosedError``.
        """
        with self._lock:
            self._abandoned = True
            if not self._outcome.done():
                self._outcome.set_exception(SandboxClosedError("the sandbox was closed"))
        return self.placement
