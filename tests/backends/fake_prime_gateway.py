"""The data plane of the fake Prime API (``fake_prime``): a sandbox's gateway.

``prime-sandboxes`` 0.5.1 reaches a sandbox at ``{gateway_url}/{user_ns}/{job_id}`` (from
``POST /sandbox/{id}/auth``): ``/upload`` (multipart ``file``, ``?path=``) and ConnectRPC
``command_session.CommandSession`` with the Google-protobuf binary codec
(``rpc_command_session.py``). The wheel ships only the messages
(``_proto/command_session/command_session_pb2.py``), no server, so the Connect framing is
written here: ``Start``/``Connect`` are server streams (``application/connect+proto``:
5-byte envelopes, then an end-of-stream JSON frame, flag 2), ``SendInput``/``SendSignal``
unary (``application/proto``, a bare message). A command is a local process of the
sandbox's ``FakeSandbox`` (``fake_daytona_sandbox``), so our runner really runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import struct
import threading
from collections.abc import AsyncIterator
from typing import Any

from fake_daytona_sandbox import FakeSandbox, kill_process, start_process
from prime_sandboxes._proto.command_session import command_session_pb2 as pb
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

_STREAM_TYPE = "application/connect+proto"
_EVENT = pb.CommandSessionEvent


def _envelope(message: Any) -> bytes:
    data = message.SerializeToString()
    return struct.pack(">BI", 0, len(data)) + data


def _end_frame(error: dict | None = None) -> bytes:
    data = json.dumps({"error": error} if error else {}).encode()
    return struct.pack(">BI", 2, len(data)) + data


def _unwrap(body: bytes) -> bytes:
    """The one message of a Connect streaming request body (its envelope removed)."""
    flags, size = struct.unpack(">BI", body[:5])
    return body[5 : 5 + size]


def _unary(message: Any) -> Response:
    return Response(message.SerializeToString(), media_type="application/proto")


def connect_error(status: int, code: str, message: str) -> JSONResponse:
    """A unary Connect error: JSON with the code, the HTTP status Connect maps it to."""
    return JSONResponse({"code": code, "message": message}, status_code=status)


class Session:
    """One command session: a local process whose events queue up for the stream."""

    def __init__(
        self, sandbox_id: str, box: FakeSandbox, request: Any, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.sandbox_id = sandbox_id
        spec = request.command
        command = spec.args[-1] if list(spec.args[:1]) == ["-c"] else " ".join(spec.args)
        cwd = box.path(spec.cwd or "/work")
        os.makedirs(cwd, exist_ok=True)
        self.proc = start_process(box.argv(command), cwd)
        if not request.stdin:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        self.inputs: set[str] = set()
        self.events: asyncio.Queue = asyncio.Queue()
        self._loop = loop
        self._open = 2
        self._lock = threading.Lock()
        self._emit(pb.CommandSessionEvent(start=_EVENT.StartEvent(pid=self.proc.pid)))
        for pipe, kind in ((self.proc.stdout, "stdout"), (self.proc.stderr, "stderr")):
            threading.Thread(target=self._pump, args=(pipe, kind), daemon=True).start()

    def _emit(self, event: Any) -> None:
        self._loop.call_soon_threadsafe(self.events.put_nowait, event)

    def _pump(self, pipe: Any, kind: str) -> None:
        for chunk in iter(lambda: os.read(pipe.fileno(), 65536), b""):
            self._emit(pb.CommandSessionEvent(data=_EVENT.DataEvent(**{kind: chunk})))
        with self._lock:
            self._open -= 1
            last = self._open == 0
        if last:
            code = self.proc.wait()
            self._emit(pb.CommandSessionEvent(end=_EVENT.EndEvent(exit_code=code)))

    async def stream(self) -> AsyncIterator[bytes]:
        while True:
            event = await self.events.get()
            yield _envelope(pb.StartResponse(event=event))
            if event.WhichOneof("event") == "end":
                yield _end_frame()
                return

    def kill(self) -> None:
        kill_process(self.proc)


class Gateway:
    """The gateway routes of every sandbox of one fake (``sessions`` by ``session_uuid``)."""

    def __init__(self, boxes: dict[str, FakeSandbox]) -> None:
        self.boxes = boxes
        self.sessions: dict[str, Session] = {}
        self.rpcs: list[str] = []

    async def upload(self, request: Request) -> Response:
        box = self.boxes.get(request.path_params["sandbox_id"])
        if box is None:
            return JSONResponse({"detail": "sandbox not found"}, status_code=404)
        path = request.query_params["path"]
        upload: Any = (await request.form())["file"]
        target = box.path(path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        data = await upload.read()
        with open(target, "wb") as f:
            f.write(data)
        stamp = "2026-01-01T00:00:00Z"
        return JSONResponse({"success": True, "path": path, "size": len(data), "timestamp": stamp})

    async def rpc(self, request: Request) -> Response:
        method = request.path_params["method"]
        self.rpcs.append(method)
        box = self.boxes.get(request.path_params["sandbox_id"])
        body = await request.body()
        if box is None:
            return connect_error(404, "not_found", "sandbox not found")
        if method == "Start":
            start = pb.StartRequest.FromString(_unwrap(body))
            sandbox_id = request.path_params["sandbox_id"]
            session = Session(sandbox_id, box, start, asyncio.get_running_loop())
            self.sessions[start.session_uuid or f"anon-{id(session)}"] = session
            return StreamingResponse(session.stream(), media_type=_STREAM_TYPE)
        if method == "SendInput":
            sent = pb.SendInputRequest.FromString(body)
            return await self._send_input(sent)
        if method == "SendSignal":
            signal = pb.SendSignalRequest.FromString(body)
            found = self.sessions.get(signal.session.session_uuid)
            if found is None:
                return connect_error(404, "not_found", "no such session")
            found.proc.send_signal(15 if signal.signal == pb.SIGNAL_SIGTERM else 9)
            return _unary(pb.SendSignalResponse())
        return connect_error(501, "unimplemented", f"{method} is not faked")

    async def _send_input(self, sent: Any) -> Response:
        session = self.sessions.get(sent.session.session_uuid)
        if session is None:
            return connect_error(404, "not_found", "no such session")
        if sent.input_uuid not in session.inputs:  # sandboxd applies a retried input once
            session.inputs.add(sent.input_uuid)
            stdin = session.proc.stdin
            assert stdin is not None
            try:
                await asyncio.to_thread(lambda: (stdin.write(sent.input.stdin), stdin.flush()))
            except (OSError, ValueError):
                return connect_error(400, "failed_precondition", "the session's stdin is closed")
        return _unary(pb.SendInputResponse())

    def end_sandbox(self, sandbox_id: str) -> None:
        """Kill every session of a deleted sandbox."""
        for session in self.sessions.values():
            if session.sandbox_id == sandbox_id:
                session.kill()

    def close(self) -> None:
        for session in self.sessions.values():
            session.kill()
