"""The server's side of the runner protocol: ``RunnerClient`` and ``RemoteSandbox``.

``RunnerClient`` speaks to one slot runner over any ``Channel`` (request ids,
deadlines, interrupts). ``RemoteSandbox`` is the ``Sandbox`` an episode gets on
the Docker and Modal backends; it turns a hung or crashed kernel into data the
way ``LocalSandbox`` does (interrupt, then a fresh kernel in the same working
directory, with the same messages), so the model sees the same text on every
backend. Only the loss of the runner itself (its container or sandbox died,
the network dropped) raises ``SandboxError``.
"""

from __future__ import annotations

import base64
import collections
import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

from analyst_env.envs.local.episode import _FAILURE_TYPES, _KERNEL_DIED, _timeout_error
from analyst_env.envs.remote.channel import ChannelClosed, QueueChannel
from analyst_env.envs.remote.wire import Decoder, encode
from analyst_env.envs.sandbox import (
    CellResult,
    ExecutionError,
    SandboxClosedError,
    SandboxError,
    ShellResult,
)

_CONTROL_TIMEOUT_S = 120.0
_SHELL_GRACE_S = 5.0


class RunnerGone(SandboxError):
    """The runner's stream ended: its process, container or sandbox is gone."""


class RunnerClient:
    """Requests and replies to one slot runner.

    Args:
        channel: The byte stream to the runner.
        label: Names the slot in error messages (e.g. a container id).
    """

    def __init__(self, channel: QueueChannel, label: str) -> None:
        self.channel = channel
        self.label = label
        self._decoder = Decoder()
        self._inbox: collections.deque[dict[str, Any]] = collections.deque()
        self._ids = itertools.count(1)
        self._send_lock = threading.Lock()
        self.info: dict[str, Any] = {}

    def wait_ready(self, timeout_s: float) -> dict[str, Any]:
        """Wait for the runner's ``ready`` message.

        Raises:
            SandboxError: It failed to start, exited, or was not ready in time.
        """
        message = self._next(time.monotonic() + timeout_s)
        if message is None:
            extra = self.channel.describe()
            raise SandboxError(
                f"the sandbox runner in {self.label} was not ready within {timeout_s:g} s"
                + (f" ({extra})" if extra else "")
            )
        if message.get("op") == "failed":
            raise SandboxError(f"the sandbox runner in {self.label} failed to start: {message.get('message')}")
        if message.get("op") != "ready":
            raise SandboxError(f"the sandbox runner in {self.label} sent {message!r} instead of 'ready'")
        self.info = message
        return message

    def send(self, request: dict[str, Any]) -> int:
        """Send ``request`` with a fresh id; return the id."""
        rid = next(self._ids)
        self._write({**request, "id": rid})
        return rid

    def interrupt(self) -> None:
        """Ask the runner to interrupt the running cell (safe from any thread)."""
        try:
            self._write({"op": "interrupt"})
        except RunnerGone:
            pass

    def reply(self, rid: int, deadline: float | None) -> dict[str, Any] | None:
        """The reply to request ``rid``, or None at the deadline. Late replies to older requests are dropped."""
        while True:
            message = self._next(deadline)
            if message is None or message.get("id") == rid:
                return message

    def call(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any] | None:
        return self.reply(self.send(request), time.monotonic() + timeout_s)

    def close(self) -> None:
        self.channel.close()

    def _write(self, message: dict[str, Any]) -> None:
        with self._send_lock:
            try:
                self.channel.send(encode(message))
            except ChannelClosed as exc:
                raise RunnerGone(f"the sandbox runner in {self.label} is gone: {exc}") from exc

    def _next(self, deadline: float | None) -> dict[str, Any] | None:
        while not self._inbox:
            timeout = None if deadline is None else deadline - time.monotonic()
            if timeout is not None and timeout <= 0:
                return None
            try:
                chunk = self.channel.recv(timeout)
            except ChannelClosed as exc:
                raise RunnerGone(f"the sandbox runner in {self.label} is gone: {exc}") from exc
            if chunk is None:
                return None
            try:
                self._inbox.extend(self._decoder.feed(chunk))
            except ValueError as exc:
                raise RunnerGone(f"the sandbox runner in {self.label} sent a corrupt frame: {exc}") from exc
        return self._inbox.popleft()


class RemoteSandbox:
    """An episode on a slot runner (Docker container, Modal sandbox).

    Args:
        client: The slot's runner client, after a successful ``start``.
        workdir: The working directory inside the slot.
        on_close: Called once when the episode ends, with whether the slot is
            still healthy (it can then serve another episode).
        interrupt_grace_s: How long an interrupted cell may take to stop
            before its kernel is replaced.
    """

    helpers_defined = True
    """The runner defined the tools' helpers before forking, so every kernel has them."""

    def __init__(
        self,
        client: RunnerClient,
        workdir: str,
        *,
        on_close: Callable[[bool], None],
        interrupt_grace_s: float = 2.0,
    ) -> None:
        self.workdir: str = workdir
        self._client = client
        self._on_close = on_close
        self._grace_s = interrupt_grace_s
        self._closed = False
        self._healthy = True
        self._state_lock = threading.Lock()
        self._call_lock = threading.Lock()

    def run_cell(self, code: str, *, timeout_s: float, silent: bool = False) -> CellResult:
        """Execute ``code`` in the kernel; see ``Sandbox.run_cell``."""
        with self._call_lock, self._guard():
            client = self._client
            rid = client.send({"op": "cell", "code": code, "silent": silent})
            reply = client.reply(rid, time.monotonic() + timeout_s)
            timed_out = reply is None
            if timed_out:
                client.interrupt()
                reply = client.reply(rid, time.monotonic() + self._grace_s)
            if reply is None:
                self._restart()
                return CellResult(
                    error=_timeout_error(timeout_s, restarted=True), timed_out=True, kernel_restarted=True
                )
            if "kernel_died" in reply:
                self._restart()
                return CellResult(error=ExecutionError(name="KernelDied", value=_KERNEL_DIED), kernel_restarted=True)
            if "failure" in reply:
                raise SandboxError(f"the kernel failed: {reply['failure']['message']}")
            result = CellResult(**{k: v for k, v in reply.items() if k != "id"})
            if not timed_out:
                return result
            traceback = result.error.traceback if result.error else ""
            return result.model_copy(update={"error": _timeout_error(timeout_s, False, traceback), "timed_out": True})

    def run_shell(self, command: str, *, timeout_s: float) -> ShellResult:
        """Run ``command`` in the working directory; see ``Sandbox.run_shell``."""
        with self._call_lock, self._guard():
            reply = self._request({"op": "shell", "command": command, "timeout_s": timeout_s}, timeout_s + _SHELL_GRACE_S)
            if reply is None:
                return ShellResult(
                    stderr=f"[the kernel died or hung while running the command; {_KERNEL_DIED}]\n", timed_out=True
                )
            return ShellResult(**{k: v for k, v in reply.items() if k != "id"})

    def put_file(self, path: str, data: bytes) -> None:
        """Write ``data`` to ``path`` in the working directory; see ``Sandbox.put_file``."""
        with self._call_lock, self._guard():
            request = {"op": "put", "path": path, "data_b64": base64.b64encode(data).decode()}
            if self._request(request, _CONTROL_TIMEOUT_S) is None:
                raise SandboxError(f"the kernel failed while writing {path!r}; it was restarted")

    def get_file(self, path: str) -> bytes:
        """Read ``path`` from the working directory; see ``Sandbox.get_file``."""
        with self._call_lock, self._guard():
            reply = self._request({"op": "get", "path": path}, _CONTROL_TIMEOUT_S)
            if reply is None:
                raise SandboxError(f"the kernel failed while reading {path!r}; it was restarted")
            return base64.b64decode(reply["data_b64"])

    def interrupt(self) -> None:
        """Interrupt the running cell, if any. Safe from any thread."""
        with self._state_lock:
            if not self._closed:
                self._client.interrupt()

    def close(self) -> None:
        """End the episode and hand the slot back (or discard it if it failed). Idempotent."""
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
        if not self._call_lock.acquire(timeout=0):
            # A call is in flight on another thread: the slot cannot be reused safely.
            self._healthy = False
            self._client.close()
            self._on_close(False)
            return
        try:
            if self._healthy:
                try:
                    reply = self._client.call({"op": "end"}, _CONTROL_TIMEOUT_S)
                    self._healthy = reply is not None and "failure" not in reply
                except SandboxError:
                    self._healthy = False
            self._on_close(self._healthy)
        finally:
            self._call_lock.release()

    # ── helpers ────────────────────────────────────────────────────────────
    def _guard(self) -> _Guard:
        with self._state_lock:
            if self._closed:
                raise SandboxClosedError("the sandbox is closed")
        return _Guard(self)

    def _restart(self) -> None:
        reply = self._client.call({"op": "restart"}, _CONTROL_TIMEOUT_S)
        if reply is None or "failure" in reply:
            raise SandboxError(f"could not restart the kernel in {self._client.label}: {reply}")

    def _request(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any] | None:
        """A non-cell request; on a dead or hung kernel, restart it and return None."""
        reply = self._client.call(request, timeout_s)
        if reply is None or "kernel_died" in reply:
            self._restart()
            return None
        if "failure" in reply:
            failure = reply["failure"]
            raise _FAILURE_TYPES.get(failure["type"], SandboxError)(failure["message"])
        return reply


class _Guard:
    """Marks the sandbox unhealthy when its runner is lost mid-call, and says so clearly."""

    def __init__(self, sandbox: RemoteSandbox) -> None:
        self.sandbox = sandbox

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        if isinstance(exc, RunnerGone):
            self.sandbox._healthy = False
            if self.sandbox._closed:
                raise SandboxClosedError("the sandbox was closed") from exc
            raise SandboxError(
                f"{exc}. Variables and files of this episode are lost; reset to start a new episode."
            ) from exc
        return False
