"""``KernelSandbox``: the one sandbox policy, over a thin link to a kernel.

The policy turns everything the model's code can do to its kernel into data: a
cell that runs too long is interrupted (SIGINT → ``KeyboardInterrupt``); one
that does not stop within a grace period, or a kernel that dies (segfault,
``os._exit``, OOM kill), gets a fresh kernel in the same working directory, and
the result says ``kernel_restarted``. Only failures of the machinery itself
raise ``SandboxError``. The texts come from ``model_texts``, so the model reads
the same words on every backend.

A ``KernelLink`` is what differs between backends: how a request reaches the
kernel and how a kernel is replaced. Two exist: ``local.socket_link`` (a
socket and a pidfd to a kernel forked by the local zygote) and
``remote.runner_link`` (requests relayed by a slot runner in a container or a
Modal sandbox). Requests and replies are the kernel's JSON messages
(``kernel.child``): ``cell``, ``shell``, ``put``, ``get``.

Threading: one caller makes calls at a time (a thread, or a greenlet on the
server's event loop: ``loop_bridge``); ``interrupt`` and ``close`` may come from
any thread. ``close`` during a call aborts the link, which makes the call raise
``SandboxClosedError``; it never waits for the call (a greenlet waiting on the
loop's thread could not end while that thread waited for it): where aborting
is sure to wake the call, the call closes the link on its way out.
"""

from __future__ import annotations

import base64
import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any, Protocol

from analyst_env.envs.loop_bridge import offload
from analyst_env.envs.model_texts import (
    SHELL_KERNEL_LOST,
    kernel_died_result,
    timed_out_restarted_result,
    timeout_error,
)
from analyst_env.envs.sandbox import (
    CellResult,
    Sandbox,
    SandboxClosedError,
    SandboxError,
    ShellResult,
    VerifierUnavailable,
)

FILE_OP_TIMEOUT_S = 120.0
"""Limit for ``put_file``/``get_file`` and other control requests, in seconds."""
SHELL_GRACE_S = 5.0
"""How long past its own limit a shell command's reply may take, in seconds."""

FAILURE_TYPES: dict[str, type[Exception]] = {
    "FileNotFoundError": FileNotFoundError,
    "IsADirectoryError": IsADirectoryError,
    "NotADirectoryError": NotADirectoryError,
    "PermissionError": PermissionError,
    "ValueError": ValueError,
}
"""Refusals a kernel reports as ``{"failure": {"type", "message"}}`` that reach the
caller as these exceptions (a bad path is the caller's error, not the sandbox's)."""


class KernelDied(Exception):
    """The kernel exited before answering; the link can still start a fresh one."""


class LinkLost(SandboxError):
    """The link itself is gone (a runner's container died, the network dropped):
    nothing of the episode can be recovered."""


class KernelLink(Protocol):
    """How one sandbox reaches its kernel. Implementations hold no policy.

    ``request``/``resume``/``restart`` come from the one thread making calls;
    ``interrupt`` and ``abort`` from any thread.
    """

    abort_wakes_calls: bool
    """``abort`` is sure to wake a blocked call: ``close`` then leaves the link's ``close`` to
    that call's return (never racing it); otherwise it closes the link at once."""

    def request(self, message: dict[str, Any], deadline: float) -> dict[str, Any] | None:
        """Send ``message`` and wait for its reply until ``deadline`` (``time.monotonic()``).

        Returns:
            The reply, or None if the deadline passed first.

        Raises:
            KernelDied: The kernel exited before answering.
            LinkLost: The link is gone.
        """
        ...

    def resume(self, deadline: float) -> dict[str, Any] | None:
        """Keep waiting for the reply to the last request (after an interrupt)."""
        ...

    def interrupt(self) -> None:
        """SIGINT the kernel's running cell; ignored if none runs."""
        ...

    def restart(self) -> None:
        """Replace the kernel with a fresh one in the same working directory.

        Raises:
            SandboxClosedError: The link was aborted.
            SandboxError: No fresh kernel could be started.
        """
        ...

    def abort(self) -> None:
        """Stop at once (kill the kernel, drop the connection), waking a blocked call."""
        ...

    def stop_agent_processes(self) -> None:
        """Kill every process of the episode (the kernel, whatever it started, whatever left
        its tree) and wait until none is left, then fork a fresh kernel from the clean template
        in the same working directory; see ``Sandbox.stop_agent_processes``.

        Raises:
            VerifierUnavailable: The link cannot be sure every process is gone.
            SandboxClosedError: The link was aborted.
            SandboxError: No fresh kernel could be started.
        """
        ...

    def close(self) -> None:
        """End the episode once no call is in flight; hand its resources back. Called once."""
        ...


class KernelSandbox(Sandbox):
    """A ``Sandbox`` over a ``KernelLink``; see ``envs.sandbox.Sandbox`` for each verb.

    Args:
        link: The link to the episode's kernel; the sandbox owns it.
        workdir: The working directory, as the kernel sees it.
        interrupt_grace_s: How long an interrupted cell may take to stop
            before its kernel is replaced.
    """

    helpers_defined = True
    """Kernels are forked from a process (zygote or slot runner) that already
    defined the tools' helpers (``kernel_helpers.HELPER_SOURCE``), and so is every
    replacement kernel."""

    def __init__(self, link: KernelLink, workdir: str, *, interrupt_grace_s: float = 2.0) -> None:
        self._workdir = workdir
        self._link = link
        self._grace_s = interrupt_grace_s
        self._closed = False
        self._agent_stopped = False  # stop_agent_processes ran: verify commands may run
        self._busy = False  # a call is in flight
        self._state_lock = threading.Lock()
        self._call_lock = threading.Lock()

    @property
    def workdir(self) -> str:
        """The working directory, as the kernel sees it."""
        return self._workdir

    def run_cell(self, code: str, *, timeout_s: float, silent: bool = False) -> CellResult:
        """Execute ``code`` in the kernel; see ``Sandbox.run_cell``."""
        with self._calling():
            if self._agent_stopped:
                raise SandboxError("the episode is being scored; no cell runs any more")
            link = self._link
            try:
                message = {"op": "cell", "code": code, "silent": silent}
                reply = link.request(message, time.monotonic() + timeout_s)
                timed_out = reply is None
                if timed_out:
                    link.interrupt()
                    reply = link.resume(time.monotonic() + self._grace_s)
            except KernelDied:
                self._restart()
                return kernel_died_result()
            if reply is None:
                self._restart()
                return timed_out_restarted_result(timeout_s)
            if "failure" in reply:
                raise SandboxError(f"the kernel failed: {reply['failure']['message']}")
            result = CellResult(**reply)
            if not timed_out:
                return result
            traceback = result.error.traceback if result.error else ""
            return result.model_copy(
                update={"error": timeout_error(timeout_s, False, traceback), "timed_out": True}
            )

    def run_shell(self, command: str, *, timeout_s: float) -> ShellResult:
        """Run ``command`` with ``/bin/sh`` in the working directory; see ``Sandbox.run_shell``."""
        with self._calling():
            request = {"op": "shell", "command": command, "timeout_s": timeout_s}
            reply = self._request(request, timeout_s + SHELL_GRACE_S)
            if reply is None:
                return ShellResult(stderr=SHELL_KERNEL_LOST, timed_out=True)
            return ShellResult(**reply)

    def stop_agent_processes(self) -> None:
        """Kill every agent process and continue with a clean kernel; see
        ``Sandbox.stop_agent_processes``. Cells are refused afterwards."""
        with self._calling():
            offload(self._link.stop_agent_processes)  # forks: on a thread on the event loop
            self._agent_stopped = True

    def run_verifier(self, command: str, *, verifier_dir: str, timeout_s: float) -> ShellResult:
        """Run a verify command in the clean kernel with a clean environment; see
        ``Sandbox.run_verifier``."""
        with self._calling():
            if not self._agent_stopped:
                raise VerifierUnavailable("verify commands run only after stop_agent_processes")
            request = {
                "op": "verify",
                "command": command,
                "timeout_s": timeout_s,
                "verifier_dir": verifier_dir,
            }
            try:
                reply = self._request(request, timeout_s + SHELL_GRACE_S)
            except PermissionError as exc:  # the kernel found a trusted directory writable
                raise VerifierUnavailable(str(exc)) from exc
            if reply is None:
                return ShellResult(stderr=SHELL_KERNEL_LOST, timed_out=True)
            return ShellResult(**reply)

    def put_file(self, path: str, data: bytes) -> None:
        """Write ``data`` to ``path`` in the working directory; see ``Sandbox.put_file``.

        Raises:
            ValueError: ``path`` is outside the working directory.
        """
        with self._calling():
            request = {"op": "put", "path": path, "data_b64": base64.b64encode(data).decode()}
            if self._request(request, FILE_OP_TIMEOUT_S) is None:
                raise SandboxError(f"the kernel failed while writing {path!r}; it was restarted")

    def get_file(self, path: str) -> bytes:
        """Read ``path`` from the working directory; see ``Sandbox.get_file``.

        Raises:
            FileNotFoundError: The file does not exist.
            ValueError: ``path`` is outside the working directory.
        """
        with self._calling():
            reply = self._request({"op": "get", "path": path}, FILE_OP_TIMEOUT_S)
            if reply is None:
                raise SandboxError(f"the kernel failed while reading {path!r}; it was restarted")
            return base64.b64decode(reply["data_b64"])

    def interrupt(self) -> None:
        """Interrupt the running cell, if any. Safe from any thread."""
        with self._state_lock:
            if not self._closed:
                self._link.interrupt()

    def close(self) -> None:
        """End the episode: abort a call in flight, and close the link. Idempotent; never waits
        for the call."""
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
            busy = self._busy
        if not busy:
            self._link.close()
            return
        self._link.abort()
        if not self._link.abort_wakes_calls:
            self._link.close()

    @contextlib.contextmanager
    def _calling(self) -> Iterator[None]:
        """One call at a time; a lost link said clearly; the link closed on the way out if
        ``close`` came during the call."""
        with self._call_lock:
            with self._state_lock:
                if self._closed:
                    raise SandboxClosedError("the sandbox is closed")
                self._busy = True
            try:
                yield
            except LinkLost as exc:
                if self._closed:
                    raise SandboxClosedError("the sandbox was closed") from exc
                raise SandboxError(
                    f"{exc}. Variables and files of this episode are lost; "
                    "reset to start a new episode."
                ) from exc
            finally:
                with self._state_lock:
                    self._busy = False
                    close_now = self._closed and self._link.abort_wakes_calls
                if close_now:
                    self._link.close()

    def _restart(self) -> None:
        with self._state_lock:
            if self._closed:
                raise SandboxClosedError("the sandbox was closed")
        offload(self._link.restart)  # a fork: on a thread when the caller shares the event loop

    def _request(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any] | None:
        """Send a non-cell request; on a dead or hung kernel, replace it and return None.

        Raises:
            FileNotFoundError, ValueError, ...: The kernel refused the request.
            SandboxError: The kernel failed in another way.
        """
        try:
            reply = self._link.request(request, time.monotonic() + timeout_s)
        except KernelDied:
            reply = None
        if reply is None:
            self._restart()
            return None
        if "failure" in reply:
            failure = reply["failure"]
            raise FAILURE_TYPES.get(failure["type"], SandboxError)(failure["message"])
        return reply
