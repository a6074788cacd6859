"""``LocalSandbox``: the sandbox policy over a socket and a pidfd to a forked kernel.

``SocketLink`` is the local ``KernelLink``: requests go over the kernel's
``socketpair`` (``frame_socket``), signals through its pidfd (``kernel``), and a
replacement kernel is forked by the zygote into the same slot. A kernel that
exits closes its socket, which the link reports as ``KernelDied``. The link
starts from a ``KernelOrder``, which the backend's workers fill while the
episode's first turn is written (``kernel_orders``); the first request waits
for it if need be.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from analyst_env.envs.frame_socket import ConnectionClosed
from analyst_env.envs.kernel_sandbox import KernelDied, KernelSandbox
from analyst_env.envs.local.kernel import KernelHandle
from analyst_env.envs.local.kernel_orders import KernelOrder, Placement
from analyst_env.envs.loop_bridge import YieldsToLoop
from analyst_env.envs.sandbox import SandboxClosedError, VerifierUnavailable


class SocketLink:
    """The link to one slot's current kernel.

    Args:
        order: The episode's kernel, delivered or on its way.
        respawn: Forks and activates a replacement kernel in the placement's slot
            (same working directory, uid and cgroups).
        kill: Kills a placement's kernel tree quickly (from any thread).
        stop_all: Kills every process of a placement's slot, so that none runs on
            (``SlotWorkers._stop_slot``); without it, verification is refused.
        on_close: Called once when the episode ends, with the last placement (its
            kernel already killed), or None if its order was never delivered;
            finishes the teardown off the caller's path.
        start_timeout_s: How long the first request waits for an order to be filled.
    """

    abort_wakes_calls = True
    """Killing the kernel closes its socket, and abandoning an order wakes its waiter:
    either wakes a blocked call at once."""

    def __init__(
        self,
        order: KernelOrder,
        *,
        respawn: Callable[[Placement], KernelHandle],
        kill: Callable[[Placement], None],
        on_close: Callable[[Placement | None], None],
        stop_all: Callable[[Placement], None] | None = None,
        start_timeout_s: float = 120.0,
    ) -> None:
        self.order = order
        self._respawn = respawn
        self._kill = kill
        self._stop_all = stop_all
        self._on_close = on_close
        self._start_timeout_s = start_timeout_s
        self._aborted = False
        self._killed = False
        self._lock = threading.Lock()

    @property
    def kernel(self) -> KernelHandle:
        """The current kernel (waits for the order to be filled)."""
        return self._placement().kernel

    def _placement(self) -> Placement:
        return self.order.placement or self.order.wait(self._start_timeout_s)

    def request(self, message: dict[str, Any], deadline: float) -> dict[str, Any] | None:
        """Send ``message``; its reply, or None at ``deadline``; see ``KernelLink.request``.

        Time spent waiting for the order to be filled moves ``deadline`` back by as much.
        """
        placement = self.order.placement
        if placement is None:
            waiting = time.monotonic()
            placement = self.order.wait(self._start_timeout_s)
            deadline += time.monotonic() - waiting
        try:
            placement.kernel.conn.send(message)
            return placement.kernel.conn.recv(deadline)
        except ConnectionClosed as exc:
            raise KernelDied(str(exc)) from exc

    def resume(self, deadline: float) -> dict[str, Any] | None:
        """Keep waiting for the last reply; see ``KernelLink.resume``."""
        try:
            return self.kernel.conn.recv(deadline)
        except ConnectionClosed as exc:
            raise KernelDied(str(exc)) from exc

    def interrupt(self) -> None:
        """SIGINT the kernel through its pidfd (nothing runs before the order is filled)."""
        with self._lock:
            placement = self.order.placement
            if not self._aborted and placement is not None:
                placement.kernel.interrupt()

    def restart(self) -> None:
        """Kill the current kernel and fork a fresh one in the same working directory."""
        with self._lock:
            if self._aborted:
                raise SandboxClosedError("the sandbox was closed")
            placement = self._placement()
            placement.kernel.release()
            placement.kernel = self._respawn(placement)

    def stop_agent_processes(self) -> None:
        """Kill every process of the slot, then fork a fresh kernel into it from the zygote; see
        ``KernelLink.stop_agent_processes``."""
        with self._lock:
            if self._aborted:
                raise SandboxClosedError("the sandbox was closed")
            if self._stop_all is None:
                raise VerifierUnavailable("this sandbox cannot stop its agent's processes")
            placement = self._placement()
            self._stop_all(placement)
            placement.kernel.release()
            placement.kernel = self._respawn(placement)

    def abort(self) -> None:
        """Kill the kernel's tree (its socket closes, waking a blocked call), or abandon the
        order (waking a call waiting for it)."""
        with self._lock:
            self._aborted = True
            self._kill_once()

    def close(self) -> None:
        """Kill the kernel's tree if not yet done; the slot is cleaned up in the background."""
        with self._lock:
            self._aborted = True
            placement = self._kill_once()
        self._on_close(placement)

    def _kill_once(self) -> Placement | None:
        placement = self.order.abandon()
        if placement is not None and not self._killed:
            self._killed = True
            self._kill(placement)
        return placement


class LocalSandbox(KernelSandbox, YieldsToLoop):
    """A sandbox backed by a kernel forked from the local zygote.

    Created by ``LocalSandboxBackend.start``. Cooperative: its waits (a kernel's socket,
    its kernel order) yield to the event loop inside ``loop_bridge.run_cooperatively``.

    Args:
        order: The episode's kernel, delivered or on its way.
        respawn, kill, stop_all, start_timeout_s: See ``SocketLink``.
        on_close: Called once when the sandbox is closed, with the sandbox and
            its last placement (kernel already killed), or None if none was delivered.
        interrupt_grace_s: How long an interrupted cell may take to stop
            before its kernel is replaced.
    """

    def __init__(
        self,
        order: KernelOrder,
        *,
        respawn: Callable[[Placement], KernelHandle],
        kill: Callable[[Placement], None],
        on_close: Callable[[LocalSandbox, Placement | None], None],
        stop_all: Callable[[Placement], None] | None = None,
        interrupt_grace_s: float = 2.0,
        start_timeout_s: float = 120.0,
    ) -> None:
        self._socket_link = SocketLink(
            order,
            respawn=respawn,
            kill=kill,
            stop_all=stop_all,
            on_close=lambda last: on_close(self, last),
            start_timeout_s=start_timeout_s,
        )
        placement = order.placement
        super().__init__(
            self._socket_link,
            placement.workdir if placement else "",
            interrupt_grace_s=interrupt_grace_s,
        )

    @property
    def image(self) -> str:
        """The image the kernel is forked from."""
        return self._socket_link.order.image

    @property
    def workdir(self) -> str:
        """The working directory, as the kernel sees it (waits for the kernel)."""
        return self._socket_link._placement().workdir

    @property
    def kernel_pid(self) -> int:
        """The current kernel process id (changes when the kernel is replaced; waits for it)."""
        return self._socket_link.kernel.pid
