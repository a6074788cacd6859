"""A local fake of Daytona's HTTP API, for the unmodified ``daytona`` SDK.

The SDK is pointed at it with ``DAYTONA_API_URL`` (or ``DaytonaConfig.api_url``).
Request and response shapes follow the SDK's generated clients
(``daytona_api_client``: ``/sandbox``, ``/snapshots``; ``daytona_toolbox_api_client``:
``{toolboxProxyUrl}/{sandboxId}/process/...``, ``/files/bulk-upload``), and the
session commands behave like Daytona's daemon (``apps/daemon/pkg/session``):
a command's stdout and stderr are read line by line into one log, each line
prefixed with ``\\x01\\x01\\x01`` or ``\\x02\\x02\\x02``; input gets a newline appended
when it has none; ``.../logs?follow=true`` streams the log over a WebSocket as
text messages of 1 KiB buffers, NUL-padded like the daemon's ``util.ReadLog``.
The work is real (``fake_daytona_sandbox``): a sandbox is a private directory, and its
commands run as local processes (``bash -c``, in a fresh network namespace when root and the
sandbox blocks the network), with the sandbox's absolute paths (``/work``,
``/opt/analyst_env``, ``/tmp``) mapped into that directory and ``python`` to this
interpreter. A snapshot "builds" by checking its Dockerfile and going pending ->
building -> active (or build_failed with a reason), logging one line per instruction
on its build-logs stream.

The Socket.IO endpoint the SDK also tries is not served; the SDK then polls.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import subprocess
import threading
import time
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

from fake_daytona_sandbox import Command, FakeSandbox
from loopback_api import LoopbackApi
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from analyst_env.server.local_server import free_port

READ_BYTES = 1024  # the daemon's log reader reads (and sends) 1 KiB buffers
NOW = "2026-01-01T00:00:00.000Z"
_ids = itertools.count(1)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"statusCode": status, "message": message}, status_code=status)


class FakeDaytona:
    """Daytona's control plane and toolbox on one loopback port. Use as a context manager."""

    def __init__(self, api_key: str = "dtn-test-key", build_s: float = 0.3) -> None:
        self.api_key = api_key
        self.build_s = build_s
        self.port = free_port()
        self.api_url = f"http://127.0.0.1:{self.port}/api"
        self.snapshots: dict[str, dict] = {}
        self.dockerfiles: dict[str, str] = {}
        self.build_logs: dict[str, list[str]] = {}
        self.sandboxes: dict[str, FakeSandbox] = {}
        self.requests: list[tuple[str, str]] = []
        self.faults = SimpleNamespace(build_failure=None, hang_s=0.0)

    # ── control plane ──────────────────────────────────────────────────────
    def _authorised(self, headers: Any) -> bool:
        return headers.get("authorization") == f"Bearer {self.api_key}"

    async def _list_snapshots(self, request: Request) -> Response:
        if self.faults.hang_s:
            await asyncio.sleep(self.faults.hang_s)
        items = list(self.snapshots.values())
        return JSONResponse({"items": items, "total": len(items), "page": 1, "totalPages": 1})

    def _snapshot(self, key: str) -> dict | None:
        return self.snapshots.get(key) or next(
            (s for s in self.snapshots.values() if s["id"] == key), None
        )

    async def _get_snapshot(self, request: Request) -> Response:
        snapshot = self._snapshot(request.path_params["id"])
        if snapshot is None:
            return _error(404, f"Snapshot {request.path_params['id']} not found")
        return JSONResponse(snapshot)

    async def _create_snapshot(self, request: Request) -> Response:
        body = await request.json()
        name = body["name"]
        if name in self.snapshots:
            return _error(409, f"Snapshot with name {name} already exists")
        dockerfile = (body.get("buildInfo") or {}).get("dockerfileContent") or ""
        snapshot = {
            "id": f"snap-{next(_ids)}", "general": False, "name": name, "imageName": None,
            "state": "pending", "size": None, "entrypoint": None, "cpu": body.get("cpu") or 1,
            "gpu": 0, "mem": body.get("memory") or 1, "disk": body.get("disk") or 3,
            "errorReason": None, "createdAt": NOW, "updatedAt": NOW, "lastUsedAt": None,
            "sourceSandboxId": None,
        }  # fmt: skip
        self.snapshots[name] = snapshot
        self.dockerfiles[name] = dockerfile
        context = bool((body.get("buildInfo") or {}).get("contextHashes"))
        build = threading.Thread(target=self._build, args=(snapshot, dockerfile, context))
        build.daemon = True
        build.start()
        return JSONResponse(snapshot)

    def _build(self, snapshot: dict, dockerfile: str, context: bool) -> None:
        time.sleep(self.build_s / 3)
        snapshot["state"] = "building"
        steps = [line for line in dockerfile.splitlines() if line and not line.startswith("#")]
        for number, step in enumerate(steps, 1):
            self.build_logs.setdefault(snapshot["id"], []).append(
                f"Step {number}/{len(steps)} : {step}\n"
            )
            time.sleep(self.build_s / len(steps))
        reason = self.faults.build_failure
        if not re.search(r"^FROM \S+", dockerfile, re.M):
            reason = "the Dockerfile has no FROM line"
        elif re.search(r"^(COPY|ADD) ", dockerfile, re.M) and not context:
            reason = "COPY without an uploaded build context"
        snapshot["state"], snapshot["errorReason"] = (
            ("build_failed", reason) if reason else ("active", None)
        )

    async def _build_logs_url(self, request: Request) -> Response:
        snapshot = self._snapshot(request.path_params["id"])
        if snapshot is None:
            return _error(404, f"Snapshot {request.path_params['id']} not found")
        return JSONResponse({"url": f"{self.api_url}/snapshots/{snapshot['id']}/build-logs"})

    async def _build_logs(self, request: Request) -> Response:
        snapshot = self._snapshot(request.path_params["id"])
        if snapshot is None:
            return _error(404, f"Snapshot {request.path_params['id']} not found")

        async def follow() -> AsyncIterator[bytes]:
            sent = 0
            while True:
                lines = self.build_logs.get(snapshot["id"], [])
                for line in lines[sent:]:
                    yield line.encode()
                sent = len(lines)
                if snapshot["state"] not in ("pending", "building"):
                    return
                await asyncio.sleep(0.02)

        return StreamingResponse(follow(), media_type="text/plain")

    async def _activate_snapshot(self, request: Request) -> Response:
        snapshot = self._snapshot(request.path_params["id"])
        if snapshot is None:
            return _error(404, f"Snapshot {request.path_params['id']} not found")
        if snapshot["state"] == "inactive":
            snapshot["state"] = "active"
        return JSONResponse(snapshot)

    async def _create_sandbox(self, request: Request) -> Response:
        body = await request.json()
        snapshot = self.snapshots.get(body.get("snapshot") or "")
        if snapshot is None or snapshot["state"] != "active":
            return _error(400, f"Snapshot {body.get('snapshot')} not found or not active")
        toolbox = f"http://127.0.0.1:{self.port}/toolbox"
        sandbox = FakeSandbox(body, snapshot, toolbox)
        self.sandboxes[sandbox.id] = sandbox
        return JSONResponse(sandbox.dto())

    def _sandbox(self, request: Request) -> FakeSandbox | None:
        sandbox = self.sandboxes.get(request.path_params["sid"])
        return None if sandbox is None or sandbox.state == "destroyed" else sandbox

    async def _get_sandbox(self, request: Request) -> Response:
        sandbox = self.sandboxes.get(request.path_params["sid"])
        return _error(404, "Sandbox not found") if sandbox is None else JSONResponse(sandbox.dto())

    async def _delete_sandbox(self, request: Request) -> Response:
        sandbox = self.sandboxes.get(request.path_params["sid"])
        if sandbox is None:
            return _error(404, "Sandbox not found")
        await asyncio.to_thread(sandbox.destroy)
        return JSONResponse(sandbox.dto())

    # ── toolbox ────────────────────────────────────────────────────────────
    async def _execute(self, request: Request) -> Response:
        sandbox = self._sandbox(request)
        if sandbox is None:
            return _error(404, "Sandbox not found")
        body = await request.json()
        done = await asyncio.to_thread(
            subprocess.run,
            sandbox.argv(body["command"]),
            cwd=sandbox.path(body.get("cwd") or "/work"),
            capture_output=True,
            timeout=body.get("timeout") or 600,
        )
        output = (done.stdout + done.stderr).decode("utf-8", "replace")
        return JSONResponse({"exitCode": done.returncode, "result": output})

    async def _upload(self, request: Request) -> Response:
        sandbox = self._sandbox(request)
        if sandbox is None:
            return _error(404, "Sandbox not found")
        form = await request.form()
        for key, value in form.multi_items():
            match = re.fullmatch(r"files\[(\d+)\]\.path", key)
            if match:
                upload: Any = form[f"files[{match.group(1)}].file"]
                target = sandbox.path(str(value))
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "wb") as f:
                    f.write(await upload.read())
        return Response(status_code=200)

    async def _create_session(self, request: Request) -> Response:
        sandbox = self._sandbox(request)
        if sandbox is None:
            return _error(404, "Sandbox not found")
        session = (await request.json())["sessionId"]
        if session in sandbox.sessions:
            return _error(409, "session already exists")
        sandbox.sessions[session] = {}
        return Response(status_code=201)

    async def _session_exec(self, request: Request) -> Response:
        sandbox = self._sandbox(request)
        commands = sandbox.sessions.get(request.path_params["session"]) if sandbox else None
        if sandbox is None or commands is None:
            return _error(404, "session not found")
        body = await request.json()
        if not body.get("runAsync"):
            return _error(400, "this fake runs session commands asynchronously only")
        command_id = f"cmd-{next(_ids)}"
        commands[command_id] = Command(sandbox.argv(body["command"]), sandbox.path("/work"))
        return JSONResponse({"cmdId": command_id})

    def _command(self, scope: Any) -> Command | None:
        params = scope.path_params
        sandbox = self.sandboxes.get(params["sid"])
        if sandbox is None or sandbox.state == "destroyed":
            return None
        return sandbox.sessions.get(params["session"], {}).get(params["command"])

    async def _input(self, request: Request) -> Response:
        command = self._command(request)
        if command is None:
            return _error(404, "command not found")
        if command.proc.poll() is not None:
            code = command.proc.returncode
            return _error(410, f"command has already completed with exit code {code}")
        data = (await request.json())["data"]
        data = data if data.endswith("\n") else data + "\n"
        try:
            await asyncio.to_thread(self._write, command, data.encode())
        except OSError as exc:
            return _error(500, f"failed to write to input pipe: {exc}")
        return Response(status_code=204)

    @staticmethod
    def _write(command: Command, data: bytes) -> None:
        assert command.proc.stdin is not None
        command.proc.stdin.write(data)
        command.proc.stdin.flush()

    async def _logs(self, websocket: WebSocket) -> None:
        if not self._authorised(websocket.headers):
            await websocket.close(code=1008)
            return
        command = self._command(websocket)
        if command is None or websocket.query_params.get("follow") != "true":
            await websocket.close(code=1011)
            return
        await websocket.accept()
        sent = 0
        try:
            while True:
                with command.lock:
                    chunk = bytes(command.log[sent:])
                if chunk:
                    sent += len(chunk)
                    for start in range(0, len(chunk), READ_BYTES):
                        # The daemon's ReadLog sends its whole read buffer: NUL padding included.
                        piece = chunk[start : start + READ_BYTES].ljust(READ_BYTES, b"\0")
                        await websocket.send_text(piece.decode("utf-8", "replace"))
                elif command.finished:
                    await websocket.close(code=1000)
                    return
                else:
                    await asyncio.sleep(0.01)
        except WebSocketDisconnect:
            return  # the client went away (its sandbox was deleted)

    async def _delete_session(self, request: Request) -> Response:
        sandbox = self._sandbox(request)
        commands = sandbox.sessions.pop(request.path_params["session"], None) if sandbox else None
        if commands is None:
            return _error(404, "session not found")
        for command in commands.values():
            await asyncio.to_thread(command.kill)
        return Response(status_code=204)

    # ── server ─────────────────────────────────────────────────────────────
    def _app(self) -> Starlette:
        def guarded(handler: Any) -> Any:
            async def endpoint(request: Request) -> Response:
                self.requests.append((request.method, request.url.path))
                if not self._authorised(request.headers):
                    return _error(401, "Invalid credentials")
                return await handler(request)

            return endpoint

        box = "/toolbox/{sid}"
        session = box + "/process/session/{session}"
        routes = [
            Route("/api/snapshots", guarded(self._list_snapshots), methods=["GET"]),
            Route("/api/snapshots", guarded(self._create_snapshot), methods=["POST"]),
            Route("/api/snapshots/{id}", guarded(self._get_snapshot), methods=["GET"]),
            Route(
                "/api/snapshots/{id}/activate", guarded(self._activate_snapshot), methods=["POST"]
            ),
            Route("/api/snapshots/{id}/build-logs-url", guarded(self._build_logs_url)),
            Route("/api/snapshots/{id}/build-logs", guarded(self._build_logs)),
            Route("/api/sandbox", guarded(self._create_sandbox), methods=["POST"]),
            Route("/api/sandbox/{sid}", guarded(self._get_sandbox), methods=["GET"]),
            Route("/api/sandbox/{sid}", guarded(self._delete_sandbox), methods=["DELETE"]),
            Route(box + "/process/execute", guarded(self._execute), methods=["POST"]),
            Route(box + "/files/bulk-upload", guarded(self._upload), methods=["POST"]),
            Route(box + "/process/session", guarded(self._create_session), methods=["POST"]),
            Route(session, guarded(self._delete_session), methods=["DELETE"]),
            Route(session + "/exec", guarded(self._session_exec), methods=["POST"]),
            Route(session + "/command/{command}/input", guarded(self._input), methods=["POST"]),
            WebSocketRoute(session + "/command/{command}/logs", self._logs),
        ]
        return Starlette(routes=routes)

    def __enter__(self) -> FakeDaytona:
        self._api = LoopbackApi(self._app(), self.port, "Daytona API")
        self._api.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for sandbox in self.sandboxes.values():
            sandbox.destroy()
        self._api.stop()
