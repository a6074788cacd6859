"""A process's stdin and stdout inside an OpenSandbox sandbox, over execd's PTY WebSocket.

OpenSandbox's Python SDK runs commands with streamed output but no stdin, so
the slot runner (which reads framed requests on stdin) cannot be started
through it. execd, the daemon OpenSandbox puts in every sandbox, has a
WebSocket made for this (``components/execd/PTY.md``): ``POST /pty`` creates a
session, ``GET /pty/{id}/ws?pty=0`` starts ``bash --norc --noprofile`` on plain
pipes (no terminal, so no echo and no line editing) and carries it:

- server to client: one JSON text frame ``{"type": "connected"}`` first; then
  binary frames whose first byte is the stream (``0x01`` stdout, ``0x02``
  stderr, ``0x03`` replay with an 8-byte offset); a JSON ``exit`` frame when
  bash ends;
- client to server: binary ``0x00`` + stdin bytes.

The first stdin line ``exec <command>`` replaces bash with the command, which
then owns the same pipes (bash reads a pipe one byte at a time, so nothing
meant for the command is consumed). This works on execd releases with and
without the newer ``command`` field of ``POST /pty``.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Iterator, Mapping, Sequence

import httpx
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from analyst_env.envs.remote.channel import QueueChannel, StderrTail
from analyst_env.envs.sandbox import SandboxError

EXECD_PORT = 44772
"""The port execd listens on in every OpenSandbox sandbox (the SDK's ``DEFAULT_EXECD_PORT``)."""

_STDIN, _STDOUT, _STDERR, _REPLAY = 0x00, 0x01, 0x02, 0x03


def _frames(ws: ClientConnection, stderr: StderrTail) -> Iterator[bytes]:
    """The process's stdout chunks; stderr goes to ``stderr``; ends when the process does."""
    try:
        for message in ws:
            if isinstance(message, str):
                frame = json.loads(message)
                if frame.get("type") == "exit":
                    return
                if frame.get("type") == "error":
                    raise SandboxError(
                        f"execd: {frame.get('code', '')} {frame.get('error', '')}".strip()
                    )
                continue
            if not message:
                continue
            kind, payload = message[0], message[1:]
            if kind == _STDOUT:
                yield payload
            elif kind == _STDERR:
                stderr.add(payload)
            elif kind == _REPLAY:
                yield payload[8:]
    except ConnectionClosed:
        return


def open_pipe(
    endpoint: str,
    headers: Mapping[str, str],
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    protocol: str = "http",
    timeout_s: float = 30.0,
) -> tuple[QueueChannel, Callable[[], None]]:
    """Start ``argv`` (with ``env``) in the sandbox whose execd is at ``endpoint``.

    Args:
        endpoint: ``host:port[/path]`` as ``SandboxSync.get_endpoint(EXECD_PORT)`` gives it.
        headers: Headers every execd request needs (``SandboxEndpoint.build_request_headers``:
            the access token, routing headers).
        argv: The command; ``env`` is set for it only.
        protocol: ``http`` or ``https`` (the WebSocket then uses ``ws`` or ``wss``).
        timeout_s: Bound on creating the session and opening the WebSocket.

    Returns:
        A channel over the process's stdin and stdout (its stderr kept for error
        messages), and a function that deletes the execd session (best effort).

    Raises:
        SandboxError: execd refused the session or the WebSocket.
    """
    base = f"{protocol}://{endpoint}"
    try:
        created = httpx.post(f"{base}/pty", json={}, headers=dict(headers), timeout=timeout_s)
        created.raise_for_status()
        session = created.json()["session_id"]
    except (httpx.HTTPError, KeyError, ValueError) as exc:
        raise SandboxError(f"execd at {endpoint} did not create a pipe session: {exc}") from exc
    ws_base = ("wss" if protocol == "https" else "ws") + base[len(protocol) :]

    def delete_session() -> None:
        try:
            httpx.delete(f"{base}/pty/{session}", headers=dict(headers), timeout=5.0)
        except httpx.HTTPError:
            pass

    try:
        # Entered as a context manager (closed by the channel), which websockets 17 asks for.
        ws = connect(
            f"{ws_base}/pty/{session}/ws?pty=0",
            additional_headers=dict(headers),
            open_timeout=timeout_s,
            max_size=None,
            compression=None,
            proxy=None,
        ).__enter__()
    except Exception as exc:
        delete_session()
        raise SandboxError(f"execd at {endpoint} refused the pipe WebSocket: {exc}") from exc
    try:
        first = ws.recv(timeout=timeout_s)
        if not isinstance(first, str) or json.loads(first).get("type") != "connected":
            raise SandboxError(f"execd sent {first!r:.200} instead of a connected frame")
        words = [f"{k}={v}" for k, v in sorted(env.items())]
        line = "exec " + shlex.join(["env", *words, *argv]) + "\n"
        ws.send(bytes([_STDIN]) + line.encode())
    except BaseException as exc:
        ws.close()
        delete_session()
        if isinstance(exc, SandboxError):
            raise
        raise SandboxError(f"execd at {endpoint} did not start the command: {exc}") from exc

    tail = StderrTail()

    def write(data: bytes) -> None:
        ws.send(bytes([_STDIN]) + data)

    def close() -> None:
        ws.close()

    return QueueChannel(_frames(ws, tail), write, close, tail.text), delete_session
