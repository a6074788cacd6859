"""A loopback stand-in for Deno Sandbox's data plane, spoken to by the real `deno-sandbox` SDK.

Shapes come from deno-sandbox 0.16.0: create is a WebSocket upgrade on `/api/v3/sandboxes/create`
that answers with an `x-deno-sandbox-id` header (sandbox.py 183-205); that socket then carries
JSON-RPC 2.0 (`spawn`, `processWait`, `processKill`) whose results are `{"ok": ...}`
(rpc.py 75-130), and byte streams as `$sandbox.stream.start/enqueue/end` notifications with
base64 data (stream.py). Processes run for real on this machine (no VM isolation: that is the
part a fake cannot prove). Only the calls the tests use are served; anything else is answered
with JSON-RPC "Method not found", so a new SDK call shows up as a loud failure.

The console's volumes and snapshots are `fake_deno_console` on a second port. A sandbox booted
with `root=<snapshot>` is a `fake_daytona_sandbox.FakeSandbox`: its `sh -c` scripts see `/work`,
`/opt/analyst_env` and `/tmp` mapped into a private directory and `python` as this interpreter
(which has the runner's packages), so the slot runner really runs; `allow_net=[]` gives it a
fresh network namespace when the tests run as root. A sandbox booted on a build volume runs
its scripts with stand-ins for `apt-get`, `pip3`, `uv` and `npm` first on its PATH: they
print what they would install and fail for a package named `nope*` or `libnope*` (a recipe
that cannot build). The socket's close ends the sandbox and kills its process groups.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import tempfile
import threading
import time
import uuid
from typing import Any

import uvicorn
from fake_daytona_sandbox import FakeSandbox
from fake_deno_console import ConsoleState
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from analyst_env.server.local_server import free_port

_CREATE = "/api/v3/sandboxes/create"
_STUB = """#!/bin/sh
echo "fake $(basename "$0") $*"
for arg in "$@"; do
  case "$arg" in nope*|libnope*) echo "E: Unable to locate package $arg" >&2; exit 100;; esac
done
"""


def _stub_bin() -> str:
    """A directory of installer stand-ins for build sandboxes."""
    folder = tempfile.mkdtemp(prefix="fake-deno-bin-")
    for name in ("apt-get", "pip3", "uv", "npm"):
        path = os.path.join(folder, name)
        with open(path, "w") as f:
            f.write(_STUB)
        os.chmod(path, 0o755)
    return folder


class _Session:
    """One sandbox: its socket, its processes, its client-to-server stdin streams."""

    def __init__(self, ws: ServerConnection, box: FakeSandbox | None, path: str | None) -> None:
        self.ws = ws
        self.box = box
        self.path = path  # PATH of a build sandbox (installer stand-ins first)
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
        await asyncio.sleep(0.1)  # the SDK registers readers only after spawn returns
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
        argv, cwd, env = [params["command"], *params.get("args", [])], params.get("cwd"), None
        if self.box is not None and argv[0] in ("sh", "bash") and argv[1:2] == ["-c"]:
            argv, cwd = self.box.argv(argv[2]), self.box.path("/work")
            os.makedirs(cwd, exist_ok=True)
            if self.path:
                env = {**os.environ, "PATH": self.path}
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=env,
            start_new_session=True,
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
                _kill(proc)
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
                _kill(proc)
        if self.box is not None:
            await asyncio.to_thread(self.box.destroy)


def _kill(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class FakeDeno:
    """Serves the fake on 127.0.0.1 in threads; ``env`` holds the SDK's variables for it."""

    def __init__(self, token: str = "fake-deno-token") -> None:
        self.token = token
        self.created: list[dict[str, Any]] = []
        self.console = ConsoleState(token)
        self.live: dict[str, dict[str, Any]] = {}  # sandbox id -> config, while its socket is open
        self._bin = _stub_bin()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.port = 0
        self.console_port = free_port()

    def _process_request(self, conn: ServerConnection, request: Request) -> Response | None:
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return conn.respond(401, "unauthorized\n")
        if request.path != _CREATE:
            return conn.respond(404, "not served by the fake\n")
        config = json.loads(base64.b64decode(request.headers["x-deno-sandbox-config"]))
        root = (config.get("root") or {}).get("volume")
        if root is not None:
            snapshot = self.console.find(self.console.snapshots, root)
            volume = self.console.find(self.console.volumes, root)
            if snapshot is None and (volume is None or not volume["is_bootable"]):
                return conn.respond(
                    400, f"root {root} is neither a snapshot nor a bootable volume\n"
                )
        self.created.append(config)
        conn.sandbox = (uuid.uuid4().hex, config)  # type: ignore[attr-defined]
        return None

    def _process_response(
        self, conn: ServerConnection, request: Request, response: Response
    ) -> None:
        if response.status_code == 101:  # accepted (a refusal is answered as it is)
            response.headers["x-deno-sandbox-id"] = conn.sandbox[0]  # type: ignore[attr-defined]

    async def _session(self, ws: ServerConnection) -> None:
        sandbox_id, config = ws.sandbox  # type: ignore[attr-defined]
        root = (config.get("root") or {}).get("volume")
        volume = self.console.find(self.console.volumes, root) if root else None
        box, path = None, None
        if root is not None:
            box = FakeSandbox({"networkBlockAll": config.get("allow_net") == []}, {}, "")
        if volume is not None:
            path = f"{self._bin}:{os.environ.get('PATH', '')}"
            self.console.attached[volume["id"]] = self.console.attached.get(volume["id"], 0) + 1
        session = _Session(ws, box, path)
        self.live[sandbox_id] = config
        try:
            async for raw in ws:
                msg = json.loads(raw)
                if "id" in msg:
                    session.spawn_task(session.handle(msg))
                else:
                    await session.handle(msg)
        finally:
            await session.close()
            del self.live[sandbox_id]
            if volume is not None:
                self.console.attached[volume["id"]] -= 1

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def main() -> None:
            server = await serve(
                self._session,
                "127.0.0.1",
                0,
                process_request=self._process_request,
                process_response=self._process_response,
                max_size=None,
            )
            self.port = server.sockets[0].getsockname()[1]
            self._ready.set()
            await server.serve_forever()

        self._loop.run_until_complete(main())

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """The SDK's variables pointing at this fake."""
        return {
            "DENO_SANDBOX_ENDPOINT": self.endpoint,
            "DENO_DEPLOY_ENDPOINT": f"http://127.0.0.1:{self.console_port}",
            "DENO_DEPLOY_TOKEN": self.token,
        }

    def start(self) -> FakeDeno:
        self._thread.start()
        self._ready.wait(10)
        config = uvicorn.Config(
            self.console.app(),
            host="127.0.0.1",
            port=self.console_port,
            log_level="warning",
            lifespan="off",
        )
        self._console = uvicorn.Server(config)
        threading.Thread(target=self._console.run, daemon=True).start()
        deadline = time.monotonic() + 10
        while not self._console.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the fake Deno console did not start")
            time.sleep(0.02)
        return self


__all__ = ["FakeDeno"]
