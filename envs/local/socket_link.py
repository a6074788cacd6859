"""``LocalSandbox``: the sandbox policy over a socket and a pidfd to a forked kernel.

``SocketLink`` is the local ``KernelLink``: requests go over the kernel's
``socketpair`` (``frame_socket``), signals through its pidfd (``kernel``), and a
replacement kernel is forked by the zygote into the same slot. A kernel that
exits closes its socket, which the link reports as ``KernelDied``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from analyst_env.envs.kernel_sandbox import KernelDied, KernelSandbox
from analyst_env.envs.local.frame_socket import ConnectionClosed
from analyst_env.envs.local.kernel import KernelHandle
from analyst_env.envs.sandbox import SandboxClosedError


class SocketLink:
    """The link to one slot's current kernel.

    Args:
        kernel: The running kernel.
        respawn: Forks and activates a replacement kernel in the same slot
            (same working directory, uid and cgroups).
        kill: Kills the kernel's whole tree quickly (from any thread).
        on_close: Called once when the episode ends, with the last kernel
            (already killed); finishes the teardown off the caller's path.
    """

    wait_for_calls_on_abort = True
    """Killing the kernel closes its socket, which wakes a blocked call at once."""

    def __init__(
        self,
        kernel: KernelHandle,
        *,
        respawn: Callable[[], KernelHandle],
        kill: Callable[[KernelHandle], None],
        on_close: Callable[[KernelHandle], None],
    ) -> None:
        self.kernel = kernel
        self._respawn = respawn
        self._kill = kill
        self._on_close = on_close
        self._aborted = False
        self._killed = False
        self._lock = threading.Lock()

    def request(self, message: dict[str, Any], deadline: float) -> dict[str, Any] | None:
        """Send ``message``; its reply, or None at ``deadline``; see ``KernelLink.request``."""
        try:
            self.kernel.conn.send(message)
            return self.kernel.conn.recv(deadline)
        except ConnectionClosed as exc:
            raise KernelDied(str(exc)) from exc

    def resume(self, deadline: float) -> dict[str, Any] | None:
        """Keep waiting for the last reply; see ``KernelLink.resume``."""
        try:
            return self.kernel.conn.recv(deadline)
        except ConnectionClosed as exc:
            raise KernelDied(str(exc)) from exc

    def interrupt(self) -> None:
        """SIGINT the kernel through its pidfd."""
        with self._lock:
            if not self._aborted:
                self.kernel.interrupt()

    def restart(self) -> None:
        """Kill the current kernel and fork a fresh one in the same working directory."""
        with self._lock:
            if self._aborted:
                raise SandboxClosedError("the sandbox was closed")
            self.kernel.release()
            self.kernel = self._respawn()

    def abort(self) -> None:
        """Kill the kernel's tree (its socket closes, waking a blocked call)."""
        with self._lock:
            self._aborted = True
            self._kill_once()

    def close(self) -> None:
        """Kill the kernel's tree if not yet done; the slot is cleaned up in the background."""
        with self._lock:
            self._aborted = True
            self._kill_once()
            kernel = self.kernel
        self._on_close(kernel)

    def _kill_once(self) -> None:
        if not self._killed:
            self._killed = True
            self._kill(self.kernel)


class LocalSandbox(KernelSandbox):
    """A sandbox backed by a kernel forked from the local zygote.

    Created by ``LocalSandboxBackend.start``.

    Args:
        kernel: The running kernel.
        workdir: Its working directory, as the kernel sees it.
        respawn, kill: See ``SocketLink``.
        on_close: Called once when the sandbox is closed, with the sandbox and
            its last kernel (already killed).
        interrupt_grace_s: How long an interrupted cell may take to stop
            before its kernel is replaced.
    """

    def __init__(
        self,
        kernel: KernelHandle,
        workdir: str,
        *,
        respawn: Callable[[], KernelHandle],
        kill: Callable[[KernelHandle], None],
        on_close: Callable[[LocalSandbox, KernelHandle], None],
        interrupt_grace_s: float = 2.0,
    ) -> None:
        self._socket_link = SocketLink(
            kernel, respawn=respawn, kill=kill, on_close=lambda last: on_close(self, last)
        )
        super().__init__(self._socket_link, workdir, interrupt_grace_s=interrupt_grace_s)

    @property
    def kernel_pid(self) -> int:
        """The current kernel process id (changes when the kernel is replaced)."""
        return self._socket_link.kernel.pid
