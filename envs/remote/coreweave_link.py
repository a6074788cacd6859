"""A byte channel to a slot runner started with ``cwsandbox``'s ``sandbox.exec(..., stdin=True)``.

CoreWeave's ``StreamExec`` carries stdin as bytes, but the SDK hands a process's stdout
to us as text: each output chunk is decoded as UTF-8 with replacement
(``Process.stdout`` is a ``StreamReader[str]``), which would corrupt the runner's
binary frames. So the runner runs behind ``line_relay`` as on Daytona and Runloop:
writes go out as base64 lines through ``Process.stdin`` (a ``StreamWriter`` whose
bounded queue gives back-pressure) and the stdout text is decoded back into runner
bytes with ``line_relay.decoded_lines``. The runner's stderr arrives separately
(``Process.stderr``) and is kept for error messages.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from analyst_env.envs.remote.channel import QueueChannel, StderrTail
from analyst_env.envs.remote.line_relay import decoded_lines, encoded_lines

#: Bound on one stdin write's acknowledgement (the SDK queues it for the stream).
SEND_TIMEOUT_S = 60.0


def _runner_chunks(process: Any, tail: StderrTail) -> Iterator[bytes]:
    """The relay's stdout text, decoded into the runner's bytes; a transport error ends it."""
    try:
        yield from decoded_lines(iter(process.stdout), tail.add)
    except ConnectionError:
        raise
    except Exception as exc:
        raise ConnectionError(f"the CoreWeave exec stream failed: {exc}") from exc


def exec_channel(process: Any, tail: StderrTail | None = None) -> QueueChannel:
    """A ``QueueChannel`` over the relayed runner in ``process``.

    Args:
        process: A ``cwsandbox.Process`` started with ``stdin=True``.
        tail: Collects the runner's stderr for error messages.
    """
    tail = tail or StderrTail()
    tail.drain(text.encode("utf-8", "replace") for text in process.stderr)

    def write(data: bytes) -> None:
        for line in encoded_lines(data):
            process.stdin.write(line.encode("ascii")).result(timeout=SEND_TIMEOUT_S)

    def close() -> None:
        try:  # end of input: the relay stops the runner and exits
            process.stdin.close().result(timeout=5)
        except Exception:
            pass
        process.cancel()

    return QueueChannel(_runner_chunks(process, tail), write, close, tail.text)
