"""Capped capture of a pipe, for a kernel's fd 1/2 and for shell commands.

Output is read from the pipe's read end by a daemon thread, so a writer never
blocks on a full pipe, and only the first ``limit`` bytes are kept: a cell that
runs ``while True: print(...)`` costs CPU until its time limit, not memory.
Capturing at the file-descriptor level (not ``sys.stdout``) also catches output
from C code, ``os.system`` and subprocesses.

The reader thread and ``take()`` share one lock and the read end is
non-blocking, so ``take()`` drains whatever is still in the pipe itself: every
byte written before ``take()`` is returned by it, with no race against the
thread.
"""

from __future__ import annotations

import os
import select
import threading

DEFAULT_LIMIT_BYTES = 2 * 1024 * 1024


class CappedBuffer:
    """Keeps the head of a byte stream and counts what was dropped.

    Args:
        limit: Maximum number of bytes kept.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._data = bytearray()
        self._dropped = 0

    def append(self, chunk: bytes) -> None:
        """Add ``chunk``, keeping only what fits under the limit."""
        room = self.limit - len(self._data)
        if room > 0:
            self._data += chunk[:room]
        self._dropped += max(0, len(chunk) - max(room, 0))

    def take(self) -> str:
        """Return the kept text (with a truncation note) and reset the buffer."""
        text = self._data.decode("utf-8", errors="replace")
        if self._dropped:
            text += f"\n[output truncated: {self._dropped} more bytes were dropped]\n"
        self._data = bytearray()
        self._dropped = 0
        return text


class PipeCapture:
    """Drains the read end of a pipe into a ``CappedBuffer`` on a daemon thread.

    The capture owns ``read_fd`` and closes it when the writers are gone (EOF).

    Args:
        read_fd: Read end of a pipe.
        limit: Bytes kept per ``take()`` period.
    """

    def __init__(self, read_fd: int, limit: int = DEFAULT_LIMIT_BYTES) -> None:
        self._fd = read_fd
        self._buffer = CappedBuffer(limit)
        self._lock = threading.Lock()
        self._eof = False
        os.set_blocking(read_fd, False)
        threading.Thread(target=self._run, name=f"pipe-capture-{read_fd}", daemon=True).start()

    def _drain_locked(self) -> None:
        while not self._eof:
            try:
                chunk = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                return
            if not chunk:
                self._eof = True
                return
            self._buffer.append(chunk)

    def _run(self) -> None:
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        while True:
            poller.poll()
            with self._lock:
                self._drain_locked()
                if self._eof:
                    os.close(self._fd)
                    return

    def take(self) -> str:
        """Return everything written so far (capped) and start a new period."""
        with self._lock:
            self._drain_locked()
            return self._buffer.take()
