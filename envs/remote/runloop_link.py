"""A byte channel to a slot runner started as a Runloop asynchronous execution.

Runloop runs a long-lived process with ``devboxes.execute_async(attach_stdin=True)``;
its stdin takes text (``executions.send_std_in``) and its stdout arrives as SSE
chunks (``executions.stream_stdout_updates``, which the SDK resumes from the last
byte offset after a drop). The runner inside is wrapped in ``line_relay``, so the
text carries base64 lines. Runloop's docs warn that retried sends can replay
input, so sends go through a client with retries off: a failed send ends the
channel (the slot is replaced) rather than risk a duplicated frame.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from analyst_env.envs.remote.channel import QueueChannel, StderrTail
from analyst_env.envs.remote.line_relay import decoded_lines, encoded_lines


def _runner_chunks(
    client: Any, devbox_id: str, execution_id: str, tail: StderrTail
) -> Iterator[bytes]:
    """Decode the relay's stdout lines from Runloop's SSE stream into runner bytes."""
    try:
        stream = client.devboxes.executions.stream_stdout_updates(execution_id, devbox_id=devbox_id)
        yield from decoded_lines((chunk.output for chunk in stream), tail.add)
    except ConnectionError:
        raise
    except Exception as exc:
        raise ConnectionError(f"the Runloop output stream failed: {exc}") from exc


def execution_channel(
    client: Any, devbox_id: str, execution_id: str, tail: StderrTail | None = None
) -> QueueChannel:
    """A ``QueueChannel`` over the relayed runner in ``execution_id`` on ``devbox_id``.

    Args:
        client: A ``runloop_api_client.Runloop``.
        devbox_id, execution_id: The devbox and the execution running the relay.
        tail: Collects the runner's stderr for error messages.
    """
    tail = tail or StderrTail()
    sender = client.with_options(max_retries=0)

    def write(data: bytes) -> None:
        for line in encoded_lines(data):
            sender.devboxes.executions.send_std_in(execution_id, devbox_id=devbox_id, text=line)

    def close() -> None:
        try:
            client.devboxes.executions.kill(execution_id, devbox_id=devbox_id)
        except Exception:
            pass

    chunks = _runner_chunks(client, devbox_id, execution_id, tail)
    return QueueChannel(chunks, write, close, tail.text)
