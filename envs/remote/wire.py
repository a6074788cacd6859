"""Length-prefixed JSON frames over a plain byte stream (pipes, container streams).

The same frame layout as ``envs.local.framing`` (a 4-byte big-endian length,
then UTF-8 JSON), but for streams that are not sockets: a runner's stdin and
stdout, a Docker attach stream, a Modal exec stream. The decoder is fed bytes
as they arrive and yields whole messages, so a frame split across reads (or
several frames in one read) is handled the same way.
"""

from __future__ import annotations

import json
from typing import Any

from analyst_env.envs.local.framing import _HEADER, MAX_FRAME_BYTES


def encode(message: dict[str, Any]) -> bytes:
    """One frame for ``message``."""
    payload = json.dumps(message, separators=(",", ":")).encode()
    return _HEADER.pack(len(payload)) + payload


class Decoder:
    """Turns a byte stream back into messages."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        """Add ``chunk``; return every message now complete, in order.

        Raises:
            ValueError: A frame is larger than ``MAX_FRAME_BYTES`` or not JSON
                (the stream is corrupt; the connection should be dropped).
        """
        self._buffer += chunk
        messages = []
        while len(self._buffer) >= _HEADER.size:
            (length,) = _HEADER.unpack_from(self._buffer)
            if length > MAX_FRAME_BYTES:
                raise ValueError(f"frame of {length} bytes exceeds the {MAX_FRAME_BYTES} limit")
            end = _HEADER.size + length
            if len(self._buffer) < end:
                break
            payload = bytes(self._buffer[_HEADER.size : end])
            del self._buffer[:end]
            messages.append(json.loads(payload))
        return messages
