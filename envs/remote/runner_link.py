"""The server's side of the runner protocol: ``RunnerClient``, ``RunnerLink``, ``RemoteSandbox``.

``RunnerClient`` speaks to one slot runner over any ``Channel`` (request ids,
deadlines, interrupts). ``RunnerLink`` is the remote ``KernelLink`` over it, and
``RemoteSandbox`` the ``KernelSandbox`` an episode gets on the Docker and Modal
backends: the same policy and texts as the local backend. Only the loss of the
runner itself (its container or sandbox died, the network dropped) raises
``SandboxError``.
"""

from __future__ import annotations

import collections
import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

from analyst_env.envs.frames import Decoder, encode
from analyst_env.envs.kernel_sandbox import (
    FILE_OP_TIMEOUT_S,
    KernelDied,
    KernelSandbox,
    LinkLost,
)
from analyst_env.envs.remote.channel import ChannelClosed, QueueChannel
from analyst_env.envs.sandbox import SandboxError, VerifierUnavailable


class RunnerGone(LinkLost):
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
            raise SandboxError(
                f"the sandbox runner in {self.label} failed to start: {message.get('message')}"
            )
        if message.get("op") != "ready":
            raise SandboxError(
                f"the sandbox runner in {self.label} sent {message!r} instead of 'ready'"
            )
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
        """The reply to request ``rid``, or None at the deadline.

        Late replies to older requests are dropped.
        """
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
                raise RunnerGone(
                    f"the sandbox runner in {self.label} sent a corrupt frame: {exc}"
                ) from exc
        return self._inbox.popleft()


class RunnerLink:
    """The link to the kernel a slot runner forked for one episode.

    Args:
        client: The slot's runner client, after a successful ``start``.
        on_close: Called once when the episode ends, with whether the slot is
            still healthy (it can then serve another episode).
    """

    abort_wakes_calls = False
    """Dropping a vendor stream need not wake its reader, so ``close`` closes the link at once."""

    def __init__(self, client: RunnerClient, *, on_close: Callable[[bool], None]) -> None:
        self._client = client
        self._on_close = on_close
        self._rid = 0
        self.healthy = True

    def request(self, message: dict[str, Any], deadline: float) -> dict[str, Any] | None:
        """Send ``message`` with a fresh id; its reply, or None at ``deadline``."""
        self._rid = self._noting_loss(self._client.send, message)
        return self.resume(deadline)

    def resume(self, deadline: float) -> dict[str, Any] | None:
        """Keep waiting for the reply to the last request (older replies are dropped)."""
        reply = self._noting_loss(self._client.reply, self._rid, deadline)
        if reply is None:
            return None
        if "kernel_died" in reply:
            raise KernelDied(reply["kernel_died"])
        return {k: v for k, v in reply.items() if k != "id"}

    def interrupt(self) -> None:
        """Ask the runner to SIGINT the running cell."""
        self._client.interrupt()

    def restart(self) -> None:
        """Ask the runner for a fresh kernel in the same working directory."""
        reply = self._noting_loss(self._client.call, {"op": "restart"}, FILE_OP_TIMEOUT_S)
        if reply is None or "failure" in reply:
            raise SandboxError(f"could not restart the kernel in {self._client.label}: {reply}")

    def stop_agent_processes(self) -> None:
        """Ask the runner to kill every process it did not start itself (the kernel, whatever
        it started, the standby) and fork a fresh kernel; see
        ``KernelLink.stop_agent_processes``. A runner that does not know the request (an
        image baked before it existed) refuses, and so does this."""
        reply = self._noting_loss(self._client.call, {"op": "stop_agent"}, FILE_OP_TIMEOUT_S)
        if reply is None:
            raise SandboxError(f"the runner in {self._client.label} did not stop the agent")
        if "failure" in reply:
            raise VerifierUnavailable(
                f"the runner in {self._client.label} could not stop the agent's processes "
                f"({reply['failure'].get('message')}); rebuild its image if it predates this"
            )

    def abort(self) -> None:
        """Drop the stream: a call in flight fails and the slot is not reused."""
        self.healthy = False
        self._client.close()

    def close(self) -> None:
        """End the episode in the runner and hand the slot back (or discard it if it failed)."""
        if self.healthy:
            try:
                reply = self._client.call({"op": "end"}, FILE_OP_TIMEOUT_S)
                self.healthy = reply is not None and "failure" not in reply
            except SandboxError:
                self.healthy = False
        self._on_close(self.healthy)

    def _noting_loss(self, call: Callable[..., Any], *args: Any) -> Any:
        try:
            return call(*args)
        except RunnerGone:
            self.healthy = False
            raise


class RemoteSandbox(KernelSandbox):
    """An episode on a slot runner (Docker container, Modal sandbox).

    Args:
        client: The slot's runner client, after a successful ``start``.
        workdir: The working directory inside the slot.
        on_close: See ``RunnerLink``.
        interrupt_grace_s: How long an interrupted cell may take to stop
            before its kernel is replaced.
    """

    def __init__(
        self,
        client: RunnerClient,
        workdir: str,
        *,
        on_close: Callable[[bool], None],
        interrupt_grace_s: float = 2.0,
    ) -> None:
        self.label = client.label
        """Names the slot (e.g. a container id), as error messages do."""
        link = RunnerLink(client, on_close=on_close)
        super().__init__(link, workdir, interrupt_grace_s=interrupt_grace_s)
