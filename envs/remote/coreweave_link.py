"""The server's side of ``coreweave_agent``: requests in JSON lines, and runner channels.

The coreweave backend never imports ``cwsandbox`` (and with it ``grpcio``, whose threads'
locks a forked scoring child would inherit held): it starts the agent as a clean interpreter
and speaks to it over its pipes. ``CoreWeaveAgent.call`` sends one request and waits for its
answer; answers come back in any order, matched by id, read by one daemon thread that also
routes each live process's output to its channel. A runner's channel carries ``line_relay``'s
base64 lines, as the SDK's exec stream gives stdout only as text.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

from analyst_env.envs.remote.channel import QueueChannel, StderrTail
from analyst_env.envs.remote.line_relay import decoded_lines, encoded_lines
from analyst_env.envs.sandbox import SandboxError

#: How long one stdin write to a runner, and a runner's close, may take.
WRITE_TIMEOUT_S = 60.0
CLOSE_TIMEOUT_S = 15.0


class AgentError(SandboxError):
    """A request the agent (the SDK, or CoreWeave behind it) failed."""


class AgentRefused(AgentError):
    """CoreWeave refused the request's credentials."""


class _Reply:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.message: dict = {}


class CoreWeaveAgent:
    """One ``coreweave_agent`` process and the requests in flight to it.

    Args:
        env: The agent's environment (the server's, with the SDK's variables set).
    """

    def __init__(self, env: dict[str, str]) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "analyst_env.envs.remote.coreweave_agent"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
            bufsize=1,
        )
        self._ids = itertools.count(1)
        self._replies: dict[int, _Reply] = {}
        self._streams: dict[int, queue.Queue] = {}
        self._lock = threading.Lock()
        self._stderr = StderrTail()
        assert self._proc.stderr is not None
        self._stderr.drain(line.encode() for line in self._proc.stderr)
        threading.Thread(target=self._read, name="coreweave-agent", daemon=True).start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            message = json.loads(line)
            if "stream" in message:
                self._streams.get(message["stream"], queue.Queue()).put(message)
                continue
            with self._lock:
                reply = self._replies.pop(message["id"], None)
            if reply is not None:
                reply.message = message
                reply.done.set()
        gone = {"error": f"the CoreWeave agent exited; {self._stderr.text()}", "refused": False}
        with self._lock:
            waiting, self._replies = list(self._replies.values()), {}
        for reply in waiting:
            reply.message = gone
            reply.done.set()
        for stream in list(self._streams.values()):
            stream.put({"end": "the CoreWeave agent exited"})

    def call(self, op: str, timeout_s: float, **args: Any) -> Any:
        """Send request ``op`` and wait for its answer (``timeout_s`` is passed on too).

        Raises:
            AgentRefused: CoreWeave refused the credentials.
            AgentError: The request failed, or the agent is gone.
            TimeoutError: No answer within ``timeout_s`` (and a little for the pipe).
        """
        number, reply = next(self._ids), _Reply()
        with self._lock:
            self._replies[number] = reply
        request = {"id": number, "op": op, "timeout_s": timeout_s, **args}
        try:
            assert self._proc.stdin is not None
            self._proc.stdin.write(json.dumps(request) + "\n")
            self._proc.stdin.flush()
        except (OSError, ValueError) as exc:
            raise AgentError(f"the CoreWeave agent is gone ({exc})") from None
        if not reply.done.wait(timeout_s + 5.0):
            with self._lock:
                self._replies.pop(number, None)
            raise TimeoutError(f"no answer from CoreWeave within {timeout_s:g} s ({op})")
        if "error" in reply.message:
            kind = AgentRefused if reply.message.get("refused") else AgentError
            raise kind(reply.message["error"])
        return reply.message.get("ok")

    def open_channel(self, sandbox: str, command: str) -> QueueChannel:
        """A channel to ``command`` (the relayed runner) started as a live process."""
        number, tail = next(self._ids), StderrTail()
        events: queue.Queue[dict] = queue.Queue()
        self._streams[number] = events
        self.call("open", WRITE_TIMEOUT_S, sandbox=sandbox, command=command, stream=number)

        def texts() -> Iterator[str]:
            while "end" not in (event := events.get()):
                if "err" in event:
                    tail.add(event["err"].encode())
                else:
                    yield event["out"]
            self._streams.pop(number, None)

        def write(data: bytes) -> None:
            for line in encoded_lines(data):
                self.call("send", WRITE_TIMEOUT_S, stream=number, text=line)

        def close() -> None:
            try:
                self.call("close_stream", CLOSE_TIMEOUT_S, stream=number)
            except Exception:
                pass

        return QueueChannel(decoded_lines(texts(), tail.add), write, close, tail.text)

    def write_file(self, sandbox: str, path: str, data: bytes, timeout_s: float) -> None:
        encoded = base64.b64encode(data).decode("ascii")
        self.call("write", timeout_s, sandbox=sandbox, path=path, data=encoded)

    @property
    def closed(self) -> bool:
        """Whether ``close`` ended the agent (and with it every sandbox it held)."""
        return self._proc.stdin is None or self._proc.stdin.closed

    def close(self) -> None:
        """End the agent's input (it stops the sandboxes it still holds) and wait for it."""
        try:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
        except OSError:
            pass
        try:
            self._proc.wait(timeout=CLOSE_TIMEOUT_S * 4)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


def agent_environment(api_key: str, base_url: str | None) -> dict[str, str]:
    """The agent's environment: this one, with the SDK's credentials set."""
    env = {**os.environ, "CWSANDBOX_API_KEY": api_key}
    if base_url:
        env["CWSANDBOX_BASE_URL"] = base_url
    return env
