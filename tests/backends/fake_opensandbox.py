"""A fake OpenSandbox server and execd, driven by the real ``opensandbox`` SDK.

It serves the HTTP API the SDK 1.1.1 calls (paths and bodies from its
generated clients in ``opensandbox/api/{lifecycle,execd}``) and execd's pipe
WebSocket (``components/execd/PTY.md`` and ``pkg/web/model/pty_ws.go`` in
alibaba/OpenSandbox):

- ``GET /v1/sandboxes``, ``POST /v1/sandboxes`` (202), ``GET /v1/sandboxes/{id}``,
  ``DELETE /v1/sandboxes/{id}`` (204), ``GET /v1/sandboxes/{id}/endpoints/{port}``,
  all behind the ``OPEN-SANDBOX-API-KEY`` header when the fake has a key;
- per sandbox an execd at ``/execd/{id}`` behind its ``X-EXECD-ACCESS-TOKEN`` (which the
  endpoint reply hands out as a header): ``GET /ping``, ``POST /pty``, ``DELETE /pty/{sid}``
  and the WebSocket ``/pty/{sid}/ws?pty=0``.

Only the cloud part is fake: the WebSocket runs a real ``bash --norc --noprofile``
on pipes in the sandbox's private directory, which stands in for the container's
filesystem (``/work`` and ``python`` in the first command line are mapped to it and
to this interpreter, as fake_modal maps them), in a fresh network namespace when
the sandbox was created with a deny-all egress policy and the tests run as root.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request, Response, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse

_ids = itertools.count(1)


@dataclass
class FakeBox:
    """One sandbox: its request, private directory, execd token and processes."""

    id: str
    request: dict
    root: str
    token: str = field(default_factory=lambda: secrets.token_hex(8))
    sessions: set[str] = field(default_factory=set)
    pids: list[int] = field(default_factory=list)

    @property
    def deny_egress(self) -> bool:
        return (self.request.get("networkPolicy") or {}).get("defaultAction") == "deny"


def _map_word(word: str, root: str) -> str:
    if word == "python":
        return sys.executable
    if word == "/work":
        return os.path.join(root, "work")
    return word


class FakeOpenSandbox:
    """The fake server on a loopback port; use as a context manager.

    Attributes:
        domain: What ``OPEN_SANDBOX_DOMAIN`` should be (``127.0.0.1:<port>``).
        boxes: Live sandboxes by id; ``created`` keeps every create request in order.
    """

    def __init__(self, api_key: str | None = None) -> None:
        self.api_key = api_key
        self.boxes: dict[str, FakeBox] = {}
        self.created: list[dict] = []
        self.deleted: list[str] = []
        self.app = self._build()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self._sock = sock
        self.domain = f"127.0.0.1:{self.port}"
        config = uvicorn.Config(
            self.app, log_level="warning", ws="websockets-sansio", lifespan="off"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True
        )

    def __enter__(self) -> FakeOpenSandbox:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the fake OpenSandbox server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        deadline = time.monotonic() + 3  # slots handed back are deleted on a thread
        while self.boxes and time.monotonic() < deadline:
            time.sleep(0.05)
        for box in list(self.boxes.values()):
            self._destroy(box)
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()

    def kill_processes(self, box: FakeBox) -> None:
        """Kill what runs in ``box`` (as the out-of-memory killer would), leaving the box."""
        for pid in box.pids:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)

    def _destroy(self, box: FakeBox) -> None:
        self.boxes.pop(box.id, None)
        self.kill_processes(box)
        shutil.rmtree(box.root, ignore_errors=True)

    def _build(self) -> FastAPI:
        app = FastAPI()

        def refused(request: Request) -> JSONResponse | None:
            if self.api_key and request.headers.get("OPEN-SANDBOX-API-KEY") != self.api_key:
                return JSONResponse(
                    {"code": "UNAUTHORIZED", "message": "bad api key"}, status_code=401
                )
            return None

        def box_of(box_id: str) -> FakeBox | None:
            return self.boxes.get(box_id)

        @app.get("/v1/sandboxes")
        def list_sandboxes(request: Request) -> Any:
            if (error := refused(request)) is not None:
                return error
            items = [_info(box) for box in self.boxes.values()]
            return {
                "items": items,
                "pagination": {
                    "page": 1,
                    "pageSize": max(len(items), 1),
                    "totalItems": len(items),
                    "totalPages": 1,
                    "hasNextPage": False,
                },
            }

        @app.post("/v1/sandboxes")
        async def create(request: Request) -> Any:
            if (error := refused(request)) is not None:
                return error
            body = await request.json()
            box = FakeBox(
                id=f"osb-{next(_ids)}", request=body, root=tempfile.mkdtemp(prefix="fake-osb-")
            )
            self.boxes[box.id] = box
            self.created.append(body)
            return JSONResponse(_info(box), status_code=202)

        @app.get("/v1/sandboxes/{box_id}")
        def get(box_id: str, request: Request) -> Any:
            if (error := refused(request)) is not None:
                return error
            box = box_of(box_id)
            if box is None:
                return JSONResponse({"code": "NOT_FOUND", "message": box_id}, status_code=404)
            return _info(box)

        @app.delete("/v1/sandboxes/{box_id}")
        def delete(box_id: str, request: Request) -> Any:
            if (error := refused(request)) is not None:
                return error
            box = box_of(box_id)
            if box is None:
                return JSONResponse({"code": "NOT_FOUND", "message": box_id}, status_code=404)
            self.deleted.append(box_id)
            self._destroy(box)
            return Response(status_code=204)

        @app.get("/v1/sandboxes/{box_id}/endpoints/{port}")
        def endpoint(box_id: str, port: int, request: Request) -> Any:
            if (error := refused(request)) is not None:
                return error
            box = box_of(box_id)
            if box is None:
                return JSONResponse({"code": "NOT_FOUND", "message": box_id}, status_code=404)
            return {
                "endpoint": f"127.0.0.1:{self.port}/execd/{box_id}",
                "headers": {"X-EXECD-ACCESS-TOKEN": box.token},
            }

        def execd_box(box_id: str, headers: Any) -> FakeBox | None:
            box = box_of(box_id)
            if box is None or headers.get("X-EXECD-ACCESS-TOKEN") != box.token:
                return None
            return box

        @app.get("/execd/{box_id}/ping")
        def ping(box_id: str, request: Request) -> Any:
            if execd_box(box_id, request.headers) is None:
                return JSONResponse({"code": "UNAUTHORIZED"}, status_code=401)
            return Response(status_code=200)

        @app.post("/execd/{box_id}/pty")
        def create_pty(box_id: str, request: Request) -> Any:
            box = execd_box(box_id, request.headers)
            if box is None:
                return JSONResponse({"code": "UNAUTHORIZED"}, status_code=401)
            session = secrets.token_hex(6)
            box.sessions.add(session)
            return JSONResponse({"session_id": session}, status_code=201)

        @app.delete("/execd/{box_id}/pty/{session}")
        def delete_pty(box_id: str, session: str, request: Request) -> Any:
            box = execd_box(box_id, request.headers)
            if box is None:
                return JSONResponse({"code": "UNAUTHORIZED"}, status_code=401)
            box.sessions.discard(session)
            return Response(status_code=200)

        @app.websocket("/execd/{box_id}/pty/{session}/ws")
        async def pty_ws(websocket: WebSocket, box_id: str, session: str) -> None:
            box = execd_box(box_id, websocket.headers)
            if box is None or session not in box.sessions:
                await websocket.close(code=1008)
                return
            if websocket.query_params.get("pty") != "0":
                await websocket.close(code=1003, reason="the fake serves pipe mode only")
                return
            await websocket.accept()
            await _serve_pipe(websocket, box, session)

        return app


def _info(box: FakeBox) -> dict:
    return {
        "id": box.id,
        "image": box.request.get("image"),
        "status": {"state": "Running"},
        "metadata": box.request.get("metadata") or {},
        "entrypoint": box.request.get("entrypoint") or ["tail", "-f", "/dev/null"],
        "createdAt": "2026-01-01T00:00:00Z",
    }


async def _serve_pipe(websocket: WebSocket, box: FakeBox, session: str) -> None:
    """bash on pipes, as execd's StartPipe, its streams framed as pty_ws.go frames them."""
    argv = ["bash", "--norc", "--noprofile"]
    if box.deny_egress and os.geteuid() == 0 and shutil.which("unshare"):
        argv = ["unshare", "--net", "--", *argv]
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=box.root,
        start_new_session=True,
    )
    box.pids.append(proc.pid)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    await websocket.send_text(
        json.dumps({"type": "connected", "session_id": session, "mode": "pipe"})
    )

    async def pump(stream: asyncio.StreamReader, kind: int) -> None:
        while chunk := await stream.read(32 * 1024):
            with contextlib.suppress(Exception):
                await websocket.send_bytes(bytes([kind]) + chunk)

    pumps = [asyncio.create_task(pump(proc.stdout, 1)), asyncio.create_task(pump(proc.stderr, 2))]

    async def feed() -> None:
        first_line = b""
        mapped = False
        while True:
            data = await websocket.receive_bytes()
            if not data or data[0] != 0:
                continue
            payload = data[1:]
            if not mapped:  # the sandbox's paths live under the fake's private directory
                first_line += payload
                if b"\n" not in first_line:
                    continue
                line, _, rest = first_line.partition(b"\n")
                words = [_map_word(w, box.root) for w in shlex.split(line.decode())]
                payload = shlex.join(words).encode() + b"\n" + rest
                mapped = True
            proc.stdin.write(payload)
            await proc.stdin.drain()

    feeder = asyncio.create_task(feed())
    waiter = asyncio.create_task(proc.wait())
    await asyncio.wait({feeder, waiter}, return_when=asyncio.FIRST_COMPLETED)
    if not waiter.done():  # the client went away: execd keeps the session; the fake ends it
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
    feeder.cancel()
    await asyncio.gather(*pumps, return_exceptions=True)
    with contextlib.suppress(Exception, WebSocketDisconnect):
        await websocket.send_text(json.dumps({"type": "exit", "exit_code": proc.returncode}))
        await websocket.close()
