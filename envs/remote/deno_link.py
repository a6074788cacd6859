"""The slot runner in a Deno sandbox, through the public calls of the ``deno-sandbox`` SDK.

The SDK is asyncio only, so it runs on the backend's ``sdk_loop.SdkLoop`` and the
backend's blocking code hands coroutines over. A sandbox lives as long as its create call's
WebSocket (``timeout="session"``), so ``OpenSandbox`` keeps that context open until the slot
is destroyed.

Why requests go through a FIFO: in deno-sandbox 0.16.0, ``spawn(..., stdin_data=...)`` does
not return until the stdin stream ends (``sandbox.py`` awaits ``complete_stream`` before it
makes the process object), so a long-lived runner cannot be fed through its stdin with the
public API (``tests/backends/test_deno_sdk_wire.py`` fails if an SDK upgrade changes this).
The runner is therefore spawned without stdin, reading a FIFO it opened read-write (``0<>``:
it never sees end of file between writers), and each request frame is delivered by one
``sh -c 'cat >> fifo'`` spawn whose finite stdin is the frame. Frames go one at a time, so two
never interleave in the FIFO. The cost is one ``spawn`` and one ``processWait`` round trip per
request over the sandbox's open WebSocket. The runner's stdout arrives as bytes, so its binary
frames need no ``line_relay``.
"""

from __future__ import annotations

import asyncio
import io
import shlex
import threading
from collections.abc import Coroutine, Iterator
from typing import Any

from analyst_env.envs.remote.channel import QueueChannel, StderrTail
from analyst_env.envs.remote.sdk_loop import SdkLoop

#: How long delivering one request frame into the FIFO may take.
WRITE_TIMEOUT_S = 60.0
#: Runner output is read in chunks of at most this many bytes.
READ_BYTES = 1 << 16


class OpenSandbox:
    """A sandbox whose create context stays open until ``close`` (then the microVM ends)."""

    def __init__(self, sdk_loop: SdkLoop, deploy: Any, timeout_s: float, **config: Any) -> None:
        self.sdk_loop = sdk_loop
        self._context = deploy.sandbox.create(**config)
        self.sandbox = sdk_loop.run(self._context.__aenter__(), timeout_s)
        self.id = str(self.sandbox.id)
        self._closing = threading.Lock()
        self._closed = False

    def run(self, script: str, *, stdin: bytes | None = None, timeout_s: float) -> tuple[int, str]:
        """Run ``sh -c script`` to its end: ``(exit code, stdout then stderr as text)``."""
        return self.sdk_loop.run(_run_script(self.sandbox, script, stdin), timeout_s)

    def close(self) -> None:
        """End the sandbox (its WebSocket closes). Idempotent; errors are dropped."""
        with self._closing:
            if self._closed:
                return
            self._closed = True
            try:
                self.sdk_loop.run(self._context.__aexit__(None, None, None), 30.0)
            except Exception:
                pass


async def _run_script(sandbox: Any, script: str, stdin: bytes | None) -> tuple[int, str]:
    proc = await sandbox.spawn(
        "sh",
        args=["-c", script],
        stdout="piped",
        stderr="piped",
        stdin_data=None if stdin is None else io.BytesIO(stdin),  # sent in 64 KiB pieces
    )
    out, err = await asyncio.gather(proc.stdout.read(), proc.stderr.read())
    status = await proc.wait()
    return int(status["code"]), (out + err).decode("utf-8", "replace")


async def _watch(coro: Coroutine[Any, Any, Any]) -> asyncio.Future[Any]:
    return asyncio.ensure_future(coro)


async def _next_chunk(stdout: asyncio.StreamReader, exited: asyncio.Future[Any]) -> bytes:
    """The runner's next output, or ``b""`` once it exited (or its sandbox's socket closed,
    which the SDK reports by cancelling the wait, not by ending the stream)."""
    read = asyncio.ensure_future(stdout.read(READ_BYTES))
    await asyncio.wait({read, exited}, return_when=asyncio.FIRST_COMPLETED)
    if read.done():
        return read.result()
    try:  # output already on its way when the runner exited
        return await asyncio.wait_for(read, 1.0)
    except TimeoutError:
        return b""


async def _drain(stderr: asyncio.StreamReader, tail: StderrTail) -> None:
    while chunk := await stderr.read(READ_BYTES):
        tail.add(chunk)


def fifo_channel(box: OpenSandbox, runner: Any, fifo: str) -> QueueChannel:
    """A ``QueueChannel`` to ``runner`` (an ``AsyncChildProcess`` reading ``fifo``) in ``box``."""
    sdk_loop, sandbox = box.sdk_loop, box.sandbox
    tail = StderrTail()
    exited = sdk_loop.run(_watch(runner.wait()))
    draining = sdk_loop.run(_watch(_drain(runner.stderr, tail)))
    deliver = f"cat >> {shlex.quote(fifo)}"

    async def send(data: bytes) -> None:
        pieces = [data[i : i + READ_BYTES] for i in range(0, len(data), READ_BYTES)]
        writer = await sandbox.spawn(  # one stream message per piece, never one huge one
            "sh", args=["-c", deliver], stdin_data=pieces, stdout="null", stderr="null"
        )
        status = await writer.wait()
        if not status["success"]:
            raise OSError(f"delivering a request to the runner failed (exit {status['code']})")

    def write(data: bytes) -> None:
        sdk_loop.run(send(data), WRITE_TIMEOUT_S)

    def chunks() -> Iterator[bytes]:
        while chunk := sdk_loop.run(_next_chunk(runner.stdout, exited)):
            yield chunk
        raise ConnectionError(f"the sandbox runner in Deno sandbox {box.id} exited")

    def close() -> None:
        draining.get_loop().call_soon_threadsafe(draining.cancel)
        try:
            sdk_loop.run(runner.kill(), 10.0)
        except Exception:
            pass

    return QueueChannel(chunks(), write, close, tail.text)
