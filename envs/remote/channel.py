"""Byte channels to a slot runner: a local process's pipes, a container stream, a Modal exec.

A channel is a duplex byte stream with a deadline-aware read. Every transport
the vendors offer is blocking (a socket, an SDK iterator), so one daemon thread
per channel reads chunks into a queue; ``recv`` then waits on the queue with a
timeout. End of stream is reported once as ``ChannelClosed`` and on every
call after it.
"""

from __future__ import annotations

import os
import queue
import subprocess
import threading
from collections.abc import Callable, Iterable

_EOF = object()


class ChannelClosed(EOFError):
    """The runner's stream ended (the runner, its container or its sandbox is gone)."""


class QueueChannel:
    """A channel fed by a reader thread over ``chunks`` and written with ``write``.

    Args:
        chunks: A blocking iterable of received byte chunks; it ends at EOF.
        write: Sends bytes (blocking); raises ``OSError`` or any error once the peer is gone.
        close: Releases the transport (idempotent).
        describe: Extra context for error messages (e.g. the runner's stderr tail).
    """

    def __init__(
        self,
        chunks: Iterable[bytes],
        write: Callable[[bytes], None],
        close: Callable[[], None],
        describe: Callable[[], str] = lambda: "",
    ) -> None:
        self._queue: queue.Queue = queue.Queue()
        self._write = write
        self._close = close
        self._describe = describe
        self._closed = False
        self._eof_reason = ""
        self._thread = threading.Thread(
            target=self._read, args=(chunks,), name="runner-channel", daemon=True
        )
        self._thread.start()

    def _read(self, chunks: Iterable[bytes]) -> None:
        try:
            for chunk in chunks:
                if chunk:
                    self._queue.put(bytes(chunk) if not isinstance(chunk, bytes) else chunk)
        except Exception as exc:  # a transport error ends the stream like EOF
            self._eof_reason = f"{type(exc).__name__}: {exc}"
        self._queue.put(_EOF)

    def send(self, data: bytes) -> None:
        """Write ``data``. Raises ``ChannelClosed`` when the peer is gone."""
        if self._closed:
            raise ChannelClosed("the channel is closed")
        try:
            self._write(data)
        except Exception as exc:
            raise ChannelClosed(
                f"writing to the runner failed: {type(exc).__name__}: {exc}"
            ) from exc

    def recv(self, timeout: float | None) -> bytes | None:
        """The next chunk, or None if ``timeout`` seconds pass first. Raises ``ChannelClosed`` at
        EOF."""
        try:
            item = self._queue.get(timeout=None if timeout is None else max(timeout, 0.0))
        except queue.Empty:
            return None
        if item is _EOF:
            self._queue.put(_EOF)  # stay closed for later calls
            reason = self._eof_reason or "the runner's output stream ended"
            extra = self.describe()
            raise ChannelClosed(f"{reason}{'; ' + extra if extra else ''}")
        return item

    def describe(self) -> str:
        try:
            return self._describe()
        except Exception:
            return ""

    def close(self) -> None:
        """Release the transport. Idempotent."""
        if not self._closed:
            self._closed = True
            try:
                self._close()
            except Exception:
                pass


class StderrTail:
    """Keeps the last few KiB of a stream (a runner's stderr) for error messages."""

    def __init__(self, limit: int = 4096) -> None:
        self.limit = limit
        self._data = b""
        self._lock = threading.Lock()

    def add(self, chunk: bytes) -> None:
        with self._lock:
            self._data = (self._data + chunk)[-self.limit :]

    def text(self) -> str:
        with self._lock:
            text = self._data.decode("utf-8", errors="replace").strip()
        return f"runner stderr: {text[-800:]}" if text else ""

    def drain(self, chunks: Iterable[bytes]) -> None:
        """Collect ``chunks`` on a daemon thread."""

        def run() -> None:
            try:
                for chunk in chunks:
                    self.add(chunk)
            except Exception:
                pass

        threading.Thread(target=run, name="runner-stderr", daemon=True).start()


def _fd_chunks(fd: int) -> Iterable[bytes]:
    while True:
        try:
            chunk = os.read(fd, 1 << 20)
        except OSError:
            return
        if not chunk:
            return
        yield chunk


def process_channel(
    argv: list[str], *, env: dict[str, str] | None = None, cwd: str | None = None
) -> tuple[QueueChannel, subprocess.Popen]:
    """Start ``argv`` as a local process and return a channel over its stdin/stdout.

    Used by the fakes of remote services (which run the real runner locally)
    and for running the runner without any container.
    """
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
    )
    stdin, stdout, stderr = proc.stdin, proc.stdout, proc.stderr
    assert stdin is not None and stdout is not None and stderr is not None  # all three are PIPE
    tail = StderrTail()
    tail.drain(_fd_chunks(stderr.fileno()))

    def write(data: bytes) -> None:
        stdin.write(data)
        stdin.flush()

    def close() -> None:
        try:
            stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    return QueueChannel(_fd_chunks(stdout.fileno()), write, close, tail.text), proc
