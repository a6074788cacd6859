"""A byte channel to a slot runner started as a Daytona session command.

Daytona runs a long-lived process as an asynchronous command in a session
(``execute_session_command(..., run_async=True)``); its stdin takes strings
(``send_session_command_input``, a newline appended by the daemon) and its
stdout arrives, line by line, over a WebSocket that
``get_session_command_logs_async`` demultiplexes into text callbacks. The
runner inside is wrapped in ``line_relay``, so each line is base64 of runner
bytes; this module turns those lines back into the byte chunks a
``QueueChannel`` reads, and the channel's writes into base64 lines.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Iterator
from typing import Any

from analyst_env.envs.remote.channel import QueueChannel, StderrTail
from analyst_env.envs.remote.line_relay import decoded_lines, encoded_lines

_END = object()


class RunnerLines:
    """The runner's stdout lines from the session command's log stream, as bytes."""

    def __init__(self, process: Any, session_id: str, command_id: str, tail: StderrTail) -> None:
        self._process = process
        self._session_id = session_id
        self._command_id = command_id
        self._tail = tail
        self._queue: queue.Queue = queue.Queue()
        self._error: BaseException | None = None

    def _follow(self) -> None:
        """Runs the SDK's log follower until the WebSocket closes (a thread of its own)."""
        try:
            asyncio.run(
                self._process.get_session_command_logs_async(
                    self._session_id,
                    self._command_id,
                    self._queue.put,
                    lambda text: self._tail.add(text.encode("utf-8", "replace")),
                )
            )
        except BaseException as exc:
            self._error = exc
        self._queue.put(_END)

    def _texts(self) -> Iterator[str]:
        threading.Thread(target=self._follow, name="daytona-runner-logs", daemon=True).start()
        while True:
            text = self._queue.get()
            if text is _END:
                if self._error is not None:
                    raise ConnectionError(f"the Daytona log stream failed: {self._error}")
                return
            # The daemon's log reader has been seen to pad messages with NUL bytes.
            yield text.replace("\x00", "")

    def __iter__(self) -> Iterator[bytes]:
        return decoded_lines(self._texts(), self._tail.add)


def session_channel(
    process: Any, session_id: str, command_id: str, tail: StderrTail | None = None
) -> QueueChannel:
    """A ``QueueChannel`` over the relayed runner in ``session_id``/``command_id``.

    Args:
        process: The sandbox's ``Process`` (``sandbox.process`` of the Daytona SDK).
        session_id, command_id: The session and the asynchronous command running the relay.
        tail: Collects the runner's stderr for error messages.
    """
    tail = tail or StderrTail()

    def write(data: bytes) -> None:
        for line in encoded_lines(data):
            process.send_session_command_input(session_id, command_id, line)

    def close() -> None:
        process.delete_session(session_id)

    return QueueChannel(RunnerLines(process, session_id, command_id, tail), write, close, tail.text)
