"""Frames (``envs.frames``) over a stream socket, with deadlines and passed descriptors.

The server and an episode kernel talk over a ``socketpair``. The reader keeps
partially received frames across timeouts, so a caller can wait for a reply in
slices (e.g. until a deadline, then again after an interrupt) without losing bytes.
A wait blocks the calling thread (``poll_readable``) unless the connection was given
another way to wait: the server's side passes ``loop_bridge.wait_readable``, which yields
to its event loop. This module runs inside every sandbox too (the kernel's end), where
only the standard library is sure to be installed, so it imports nothing of the server's.
"""

from __future__ import annotations

import collections
import select
import socket
import time
from collections.abc import Callable
from typing import Any, overload

from analyst_env.envs.frames import Decoder, encode


def poll_readable(fd: int, timeout_s: float) -> bool:
    """Block up to ``timeout_s`` until ``fd`` is readable (or closed by its peer).

    ``poll``, not ``select``: a server with a few hundred live episodes holds descriptors
    above ``FD_SETSIZE`` (1024), which ``select`` rejects.
    """
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(max(0, int(timeout_s * 1000 + 0.999))))


class ConnectionClosed(EOFError):
    """The peer closed the connection (for a kernel: it exited)."""


class FrameConnection:
    """A framed JSON connection over a connected stream socket.

    File descriptors can ride along a message (``SCM_RIGHTS``); only a side
    created with ``accept_fds`` keeps them (the kernel, which receives the
    task files that way). The server never accepts descriptors from a kernel.

    Args:
        sock: A connected ``SOCK_STREAM`` socket; the connection owns it.
        accept_fds: Collect descriptors sent with messages (see ``take_fds``).
        wait_readable: How a ``recv`` with a deadline waits (default: block the thread).
    """

    def __init__(
        self,
        sock: socket.socket,
        *,
        accept_fds: bool = False,
        wait_readable: Callable[[int, float], bool] = poll_readable,
    ) -> None:
        self._wait_readable = wait_readable
        self._sock = sock
        self._sock.setblocking(True)
        self._decoder = Decoder()
        self._inbox: collections.deque[dict[str, Any]] = collections.deque()
        self._accept_fds = accept_fds
        self._fds: list[int] = []

    def fileno(self) -> int:
        """Return the socket's file descriptor (for ``select``)."""
        return self._sock.fileno()

    def send(self, message: dict[str, Any], fds: list[int] | tuple[int, ...] = ()) -> None:
        """Send one message, blocking until it is written.

        Args:
            message: A JSON-serialisable dict.
            fds: Descriptors to pass along (at most 250); the peer must accept them.

        Raises:
            ConnectionClosed: The peer has gone away.
        """
        frame = encode(message)
        try:
            if fds:
                sent = socket.send_fds(self._sock, [frame], list(fds))
                frame = frame[sent:]
            self._sock.sendall(frame)
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise ConnectionClosed(str(exc)) from exc

    def take_fds(self) -> list[int]:
        """Descriptors received so far (the caller owns them now)."""
        fds, self._fds = self._fds, []
        return fds

    @overload
    def recv(self, deadline: None = None) -> dict[str, Any]: ...

    @overload
    def recv(self, deadline: float | None) -> dict[str, Any] | None: ...

    def recv(self, deadline: float | None = None) -> dict[str, Any] | None:
        """Receive one message.

        Args:
            deadline: ``time.monotonic()`` value after which to give up, or
                ``None`` to wait forever.

        Returns:
            The message, or ``None`` if the deadline passed first (any partial
            frame is kept for the next call).

        Raises:
            ConnectionClosed: The peer closed the connection.
            ValueError: The peer sent a malformed frame.
        """
        while True:
            if self._inbox:
                return self._inbox.popleft()
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self._wait_readable(self._sock.fileno(), remaining):
                    return None
            try:
                if self._accept_fds:
                    chunk, fds, _, _ = socket.recv_fds(self._sock, 1 << 20, 253)
                    self._fds += fds
                else:
                    chunk = self._sock.recv(1 << 20)
            except ConnectionResetError as exc:
                raise ConnectionClosed(str(exc)) from exc
            if not chunk:
                raise ConnectionClosed("peer closed the connection")
            self._inbox.extend(self._decoder.feed(chunk))

    def close(self) -> None:
        """Close the socket. Idempotent."""
        self._sock.close()
