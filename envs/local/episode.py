"""``LocalSandbox``: one episode's kernel, driven from the server.

The sandbox turns everything the model's code can do to its kernel into data:
a cell that runs too long is interrupted (SIGINT → ``KeyboardInterrupt``); one
that does not stop within a grace period, or a kernel that dies (segfault,
``os._exit``, OOM kill), gets a fresh kernel forked into the same working
directory, and the result says ``kernel_restarted``. Only failures of the
machinery itself raise ``SandboxError``.

Threading: one thread makes calls at a time; ``interrupt`` and ``close`` may
come from any thread. ``close`` kills the kernel's tree, which makes a call in
flight see its connection close and raise ``SandboxClosedError``.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Callable
from typing import Any

from ..sandbox import (
    CellResult,
    ExecutionError,
    SandboxClosedError,
    SandboxError,
    ShellResult,
)
from .framing import ConnectionClosed
from .kernel import KernelHandle

_FILE_OP_TIMEOUT_S = 120.0
_SHELL_GRACE_S = 5.0
_KERNEL_DIED = (
    "The kernel process died (a crash, os._exit or the out-of-memory killer) and was "
    "restarted: variables are lost, files in the working directory are kept"
)
_FAILURE_TYPES: dict[str, type[Exception]] = {
    "FileNotFoundError": FileNotFoundError,
    "IsADirectoryError": IsADirectoryError,
    "NotADirectoryError": NotADirectoryError,
    "PermissionError": PermissionError,
    "ValueError": ValueError,
}


def _timeout_error(timeout_s: float, restarted: bool, traceback: str = "") -> ExecutionError:
    value = f"The cell exceeded its {timeout_s:g} s time limit and was interrupted"
    if restarted:
        value += (
            "; it did not stop, so the kernel was restarted: variables are lost, "
            "files in the working directory are kept"
        )
    return ExecutionError(name="TimeoutError", value=value, traceback=traceback)


class LocalSandbox:
    """A sandbox backed by a kernel forked from the local zygote.

    Created by ``LocalSandboxBackend.start``.

    Args:
        kernel: The running kernel.
        workdir: Its working directory, as the kernel sees it.
        respawn: Forks and activates a replacement kernel in the same slot
            (same working directory, uid and cgroups).
        kill: Kills the kernel's whole tree quickly (from any thread).
        on_close: Called once when the sandbox is closed, with the last
            kernel (already killed); finishes the teardown off the caller's path.
        interrupt_grace_s: How long an interrupted cell may take to stop
            before its kernel is replaced.
    """

    helpers_defined = True
    """Kernels are forked from a zygote that already defined the tools' helpers
    (``kernel_helpers.HELPER_SOURCE``), and so is every replacement kernel."""

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
        self.workdir: str = workdir
        self._kernel = kernel
        self._respawn = respawn
        self._kill = kill
        self._on_close = on_close
        self._grace_s = interrupt_grace_s
        self._closed = False
        self._state_lock = threading.Lock()
        self._call_lock = threading.Lock()

    @property
    def kernel_pid(self) -> int:
        """The current kernel process id (changes when the kernel is replaced)."""
        return self._kernel.pid

    def run_cell(self, code: str, *, timeout_s: float, silent: bool = False) -> CellResult:
        """Execute ``code`` in the kernel; see ``Sandbox.run_cell``."""
        with self._call_lock:
            kernel = self._live_kernel()
            try:
                kernel.conn.send({"op": "cell", "code": code, "silent": silent})
                reply = kernel.conn.recv(time.monotonic() + timeout_s)
                if reply is not None:
                    return self._cell_result(reply)
                kernel.interrupt()
                reply = kernel.conn.recv(time.monotonic() + self._grace_s)
            except ConnectionClosed:
                self._replace_kernel()
                return CellResult(
                    error=ExecutionError(name="KernelDied", value=_KERNEL_DIED),
                    kernel_restarted=True,
                )
            if reply is None:
                self._replace_kernel()
                return CellResult(
                    error=_timeout_error(timeout_s, restarted=True),
                    timed_out=True,
                    kernel_restarted=True,
                )
            result = self._cell_result(reply)
            traceback = result.error.traceback if result.error else ""
            return result.model_copy(
                update={"error": _timeout_error(timeout_s, False, traceback), "timed_out": True}
            )

    def run_shell(self, command: str, *, timeout_s: float) -> ShellResult:
        """Run ``command`` with ``/bin/sh`` in the working directory; see ``Sandbox.run_shell``."""
        with self._call_lock:
            request = {"op": "shell", "command": command, "timeout_s": timeout_s}
            reply = self._request(request, timeout_s + _SHELL_GRACE_S)
            if reply is None:
                return ShellResult(
                    stderr=f"[the kernel died or hung while running the command; {_KERNEL_DIED}]\n",
                    timed_out=True,
                )
            return ShellResult(**reply)

    def put_file(self, path: str, data: bytes) -> None:
        """Write ``data`` to ``path`` in the working directory; see ``Sandbox.put_file``.

        Raises:
            ValueError: ``path`` is outside the working directory.
        """
        with self._call_lock:
            request = {"op": "put", "path": path, "data_b64": base64.b64encode(data).decode()}
            if self._request(request, _FILE_OP_TIMEOUT_S) is None:
                raise SandboxError(f"the kernel failed while writing {path!r}; it was restarted")

    def get_file(self, path: str) -> bytes:
        """Read ``path`` from the working directory; see ``Sandbox.get_file``.

        Raises:
            FileNotFoundError: The file does not exist.
            ValueError: ``path`` is outside the working directory.
        """
        with self._call_lock:
            reply = self._request({"op": "get", "path": path}, _FILE_OP_TIMEOUT_S)
            if reply is None:
                raise SandboxError(f"the kernel failed while reading {path!r}; it was restarted")
            return base64.b64decode(reply["data_b64"])

    def interrupt(self) -> None:
        """Interrupt the running cell, if any. Safe from any thread."""
        with self._state_lock:
            if not self._closed:
                self._kernel.interrupt()

    def close(self) -> None:
        """Kill the kernel's process tree; the slot is cleaned up in the background. Idempotent."""
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
            kernel = self._kernel
        self._kill(kernel)  # wakes a call in flight, which then releases the call lock
        with self._call_lock:
            pass
        self._on_close(self, kernel)

    def _live_kernel(self) -> KernelHandle:
        with self._state_lock:
            if self._closed:
                raise SandboxClosedError("the sandbox is closed")
            return self._kernel

    def _replace_kernel(self) -> None:
        """Kill the current kernel and fork a fresh one in the same working directory.

        Raises:
            SandboxClosedError: The sandbox was closed (possibly mid-call).
        """
        with self._state_lock:
            if self._closed:
                raise SandboxClosedError("the sandbox was closed")
            self._kernel.release()
            self._kernel = self._respawn()

    def _request(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any] | None:
        """Send a non-cell request; on a dead or hung kernel, replace it and return None.

        Raises:
            FileNotFoundError, ValueError, ...: The kernel refused the request.
            SandboxError: The kernel failed in another way.
        """
        kernel = self._live_kernel()
        try:
            kernel.conn.send(request)
            reply = kernel.conn.recv(time.monotonic() + timeout_s)
        except ConnectionClosed:
            reply = None
        if reply is None:
            self._replace_kernel()
            return None
        if "failure" in reply:
            failure = reply["failure"]
            raise _FAILURE_TYPES.get(failure["type"], SandboxError)(failure["message"])
        return reply

    @staticmethod
    def _cell_result(reply: dict[str, Any]) -> CellResult:
        if "failure" in reply:
            raise SandboxError(f"the kernel failed: {reply['failure']['message']}")
        return CellResult(**reply)
