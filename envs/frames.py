"""The one frame codec: length-prefixed JSON messages.

Every link between the server and a kernel (a ``socketpair`` to a local kernel,
a slot runner's stdin/stdout, a container or Modal stream) carries the same
frames: a 4-byte big-endian length, then that many bytes of UTF-8 JSON. JSON
(not pickle) keeps the boundary data-only: nothing a kernel sends can execute
code in the server. Mime bundles are strings (images are base64), so JSON fits.

The decoder is fed bytes as they arrive and yields whole messages, so a frame
split across reads (or several frames in one read) is handled the same way,
and a reader may wait in slices (until a deadline, then again after an
interrupt) without losing bytes.
"""

from __future__ import annotations

import json
import struct
from typing import Any

HEADER = struct.Struct(">I")
"""The length prefix of every frame."""
MAX_FRAME_BYTES = 512 * 1024 * 1024
"""A longer frame means a corrupt stream; the connection is dropped."""


def encode(message: dict[str, Any]) -> bytes:
    """One frame for ``message`` (a JSON-serialisable dict)."""
    payload = json.dumps(message, separators=(",", ":")).encode()
    return HEADER.pack(len(payload)) + payload


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
        while len(self._buffer) >= HEADER.size:
            (length,) = HEADER.unpack_from(self._buffer)
            if length > MAX_FRAME_BYTES:
                raise ValueError(f"frame of {length} bytes exceeds the {MAX_FRAME_BYTES} limit")
            end = HEADER.size + length
            if len(self._buffer) < end:
                break
            payload = bytes(self._buffer[HEADER.size : end])
            del self._buffer[:end]
            messages.append(json.loads(payload))
        return messages
