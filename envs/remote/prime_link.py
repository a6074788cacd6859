"""A byte channel to a slot runner started as a Prime live process.

``prime-sandboxes`` runs a long-lived process only with ``AsyncSandboxClient.open_process``
(a ConnectRPC ``CommandSession/Start`` stream; the sync client has none), so the process is
opened and read on the backend's ``SdkLoop``. Its stdin takes bytes (``SendInput``, each with
an idempotency key, so the SDK's retries never duplicate a frame) and its stdout arrives as
bytes; the runner is still wrapped in ``line_relay``, as on Daytona and Runloop, for one
reason: the SDK re-attaches a dropped stream by itself and does not replay what was printed
while it was detached, and a missing base64 line breaks the runner's framing loudly (the
slot fails and is replaced) where raw bytes could go missing unnoticed in between frames.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any

from analyst_env.envs.remote.channel import QueueChannel, StderrTail
from analyst_env.envs.remote.line_relay import decoded_lines, encoded_lines
from analyst_env.envs.remote.sdk_loop import SdkLoop

#: How long opening the live process (its first event) and one stdin write may take.
OPEN_TIMEOUT_S = 60.0
WRITE_TIMEOUT_S = 60.0
#: How long closing the process (terminate, then kill) may take.
CLOSE_TIMEOUT_S = 15.0


async def _next_chunk(stream: AsyncIterator[bytes]) -> bytes:
    """The stream's next bytes, ``b""`` at its end."""
    try:
        return await stream.__anext__()
    except StopAsyncIteration:
        return b""


async def _drain(stderr: AsyncIterator[bytes], tail: StderrTail) -> None:
    async for chunk in stderr:
        tail.add(chunk)


async def _watch(coro: Coroutine[Any, Any, Any]) -> asyncio.Future[Any]:
    return asyncio.ensure_future(coro)


def _texts(sdk_loop: SdkLoop, process: Any) -> Iterator[str]:
    """The relay's stdout as text, until the process's stream ends."""
    while True:
        try:
            chunk = sdk_loop.run(_next_chunk(process.stdout))
        except Exception as exc:
            raise ConnectionError(f"the Prime process stream failed: {exc}") from exc
        if not chunk:
            return
        yield chunk.decode("ascii", "replace")


def process_channel(
    sdk_loop: SdkLoop, client: Any, sandbox_id: str, command: str, tail: StderrTail | None = None
) -> QueueChannel:
    """A ``QueueChannel`` over ``command`` (the relayed runner) started in ``sandbox_id``.

    Args:
        sdk_loop: The loop ``client`` was made on.
        client: A ``prime_sandboxes.AsyncSandboxClient``.
        sandbox_id: A running sandbox.
        command: The shell command that starts ``line_relay`` and the runner.
        tail: Collects the runner's stderr for error messages.
    """
    tail = tail or StderrTail()
    process = sdk_loop.run(client.open_process(sandbox_id, command), OPEN_TIMEOUT_S)
    draining = sdk_loop.run(_watch(_drain(process.stderr, tail)))

    def write(data: bytes) -> None:
        for line in encoded_lines(data):
            sdk_loop.run(process.write_stdin(line.encode("ascii")), WRITE_TIMEOUT_S)

    def close() -> None:
        draining.get_loop().call_soon_threadsafe(draining.cancel)
        try:
            sdk_loop.run(process.aclose(), CLOSE_TIMEOUT_S)
        except Exception:
            pass

    chunks = decoded_lines(_texts(sdk_loop, process), tail.add)
    return QueueChannel(chunks, write, close, tail.text)
