"""A loopback stand-in for Deno Sandbox's data plane, spoken to by the real `deno-sandbox` SDK.

Shapes come from deno-sandbox 0.16.0: create is a WebSocket upgrade on `/api/v3/sandboxes/create`
that answers with an `x-deno-sandbox-id` header (sandbox.py 183-205); that socket then carries
JSON-RPC 2.0 (`spawn`, `processWait`, `processKill`) whose results are `{"ok": ...}`
(rpc.py 75-130), and byte streams as `$sandbox.stream.start/enqueue/end` notifications with
base64 data (stream.py). Processes run for real on this machine (no VM isolation: that is the
part a fake cannot prove). Only the calls the tests use are served; anything else is answered
with JSON-RPC "Method not found", so a new SDK call shows up as a loud failure.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import uuid
from typing import Any

from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

_CREATE = "/api/v3/sandboxes/create"


class _Session:
    """One sandbox: its socket, its processes, its client-to-server stdin streams."""

    def __init__(self, ws: ServerConnection) -> None:
        self.ws = ws
        self.procs: dict[int, asyncio.subprocess.Process] = {}
        self.stdin: dict[int, asyncio.Queue[bytes | None]] = {}
        self.next_stream = 10_000
        self.tasks: set[asyncio.Task[Any]] = set()

    async def send(self, payload: dict[str, Any]) -> None:
        try:
            await self.ws.send(json.dumps(payload))
        except ConnectionClosed:  # the client left; output of its killed processes is dropped
            pass

    def spawn_task(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def pump_out(self, reader: asyncio.StreamReader, stream_id: int) -> None:
        await asyncio.sleep(0.05)  # the SDK registers readers only after spawn returns
        while chunk := await reader.read(65536):
            data = base64.b64encode(chunk).decode()
            await self.send(
                {
                    "jsonrpc": "2.0",
                    "method": "$sandbox.stream.enqueue",
                    "params": {"streamId": stream_id, "data": data},
                }
            )
        await self.send(
            {"jsonrpc": "2.0", "method": "$sandbox.stream.end", "params": {"streamId": stream_id}}
        )

    async def pump_in(
        self, proc: asyncio.subprocess.Process, queue: asyncio.Queue[bytes | None]
    ) -> None:
        assert proc.stdin is not None
        while (chunk := await queue.get()) is not None:
            proc.stdin.write(chunk)
            await proc.stdin.drain()
        proc.stdin.close()

    async def spawn(self, params: dict[str, Any]) -> dict[str, Any]:
        stdin_id = params.get("stdinStreamId")
        proc = await asyncio.create_subprocess_exec(
            params["command"],
            *params.get("args", []),
            cwd=params.get("cwd"),
            stdin=asyncio.subprocess.PIPE if stdin_id else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        self.procs[proc.pid] = proc
        if stdin_id:
            self.spawn_task(self.pump_in(proc, self.stdin.setdefault(stdin_id, asyncio.Queue())))
        out_id, err_id = self.next_stream, self.next_stream + 1
        self.next_stream += 2
        assert proc.stdout is not None and proc.stderr is not None
        self.spawn_task(self.pump_out(proc.stdout, out_id))
        self.spawn_task(self.pump_out(proc.stderr, err_id))
        return {"pid": proc.pid, "stdoutStreamId": out_id, "stderrStreamId": err_id}

    async def wait(self, pid: int) -> dict[str, Any]:
        code = await self.procs[pid].wait()
        return {"success": code == 0, "code": code, "signal": None}

    async def handle(self, msg: dict[str, Any]) -> None:
        method, params = msg.get("method"), msg.get("params", {})
        if method.startswith("$sandbox.stream."):
            queue = self.stdin.setdefault(params["streamId"], asyncio.Queue())
            if method.endswith("enqueue"):
                queue.put_nowait(base64.b64decode(params["data"]))
            elif method.endswith(("end", "error")):
                queue.put_nowait(None)
            return
        if method == "spawn":
            result: dict[str, Any] = {"ok": await self.spawn(params)}
        elif method == "processWait":
            result = {"ok": await self.wait(params["pid"])}
        elif method == "processKill":
            proc = self.procs.get(params["pid"])
            if proc is not None and proc.returncode is None:
                proc.kill()
            result = {"ok": None}
        else:
            await self.send(
                {
                    "jsonrpc": "2.0",
                    "id": msg["id"],
                    "error": {"code": -32601, "message": "Method not found"},
                }
            )
            return
        await self.send({"jsonrpc": "2.0", "id": msg["id"], "result": result})

    async def close(self) -> None:
        for proc in self.procs.values():
            if proc.returncode is None:
                proc.kill()


class FakeDeno:
    """Serves the fake on 127.0.0.1 in a thread; `endpoint` goes into DENO_SANDBOX_ENDPOINT."""

    def __init__(self, token: str = "fake-deno-token") -> None:
        self.token = token
        self.created: list[dict[str, Any]] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.port = 0

    def _process_request(self, conn: ServerConnection, request: Request) -> Response | None:
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return conn.respond(401, "unauthorized\n")
        if request.path != _CREATE:
            return conn.respond(404, "not served by the fake\n")
        config = json.loads(base64.b64decode(request.headers["x-deno-sandbox-config"]))
        self.created.append(config)
        return None

    def _process_response(
        self, conn: ServerConnection, request: Request, response: Response
    ) -> None:
        response.headers["x-deno-sandbox-id"] = uuid.uuid4().hex

    async def _session(self, ws: ServerConnection) -> None:
        session = _Session(ws)
        try:
            async for raw in ws:
                msg = json.loads(raw)
                if "id" in msg:
                    session.spawn_task(session.handle(msg))
                else:
                    await session.handle(msg)
        finally:
            await session.close()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def main() -> None:
            server = await serve(
                self._session,
                "127.0.0.1",
                0,
                process_request=self._process_request,
                process_response=self._process_response,
            )
            self.port = server.sockets[0].getsockname()[1]
            self._ready.set()
            await server.serve_forever()

        self._loop.run_until_complete(main())

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeDeno:
        self._thread.start()
        self._ready.wait(10)
        return self


__all__ = ["FakeDeno"]
