"""Length-prefixed JSON messages over a stream socket.

The server and an episode kernel talk over a ``socketpair``. Each message is a
4-byte big-endian length followed by that many bytes of UTF-8 JSON. JSON (not
pickle) keeps the boundary data-only: nothing the kernel sends can execute code
in the server. Mime bundles are strings (images are base64), so JSON fits.

The reader keeps partially received frames across timeouts, so a caller can wait
for a reply in slices (e.g. until a deadline, then again after an interrupt)
without losing bytes.
"""

from __future__ import annotations

import json
import select
import socket
import struct
import time
from typing import Any

_HEADER = struct.Struct(">I")
MAX_FRAME_BYTES = 512 * 1024 * 1024


class ConnectionClosed(EOFError):
    """The peer closed the connection (for a kernel: it exited)."""


class FrameConnection:
    """A framed JSON connection over a connected stream socket.

    Args:
        sock: A connected ``SOCK_STREAM`` socket; the connection owns it.
    """

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._sock.setblocking(True)
        self._buffer = bytearray()

    def fileno(self) -> int:
        """Return the socket's file descriptor (for ``select``)."""
        return self._sock.fileno()

    def send(self, message: dict[str, Any]) -> None:
        """Send one message, blocking until it is written.

        Raises:
            ConnectionClosed: The peer has gone away.
        """
        payload = json.dumps(message, separators=(",", ":")).encode()
        try:
            self._sock.sendall(_HEADER.pack(len(payload)) + payload)
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise ConnectionClosed(str(exc)) from exc

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
            message = self._pop_frame()
            if message is not None:
                return message
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not select.select([self._sock], [], [], remaining)[0]:
                    return None
            try:
                chunk = self._sock.recv(1 << 20)
            except ConnectionResetError as exc:
                raise ConnectionClosed(str(exc)) from exc
            if not chunk:
                raise ConnectionClosed("peer closed the connection")
            self._buffer += chunk

    def _pop_frame(self) -> dict[str, Any] | None:
        if len(self._buffer) < _HEADER.size:
            return None
        (length,) = _HEADER.unpack_from(self._buffer)
        if length > MAX_FRAME_BYTES:
            raise ValueError(f"frame of {length} bytes exceeds the {MAX_FRAME_BYTES} limit")
        end = _HEADER.size + length
        if len(self._buffer) < end:
            return None
        payload = bytes(self._buffer[_HEADER.size : end])
        del self._buffer[:end]
        return json.loads(payload)

    def close(self) -> None:
        """Close the socket. Idempotent."""
        self._sock.close()
