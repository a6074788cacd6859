"""A local fake of the two HTTP services inside an E2B sandbox, for the real E2B SDK.

With ``E2B_DEBUG=true`` the unmodified SDK skips E2B's control plane
(``Sandbox.create`` returns ``debug_sandbox_id``) and talks to the sandbox's
services on localhost: the code interpreter's Jupyter bridge on port 49999 and
envd on port 49983. This module serves both, doing the work for real:

* ``:49999`` ``POST /contexts``, ``POST /execute`` (NDJSON stream),
  ``POST /contexts/{id}/restart``, ``DELETE /contexts/{id}``: each context is
  a real ipykernel (jupyter_client), and iopub messages are turned into E2B's
  NDJSON lines the way E2B's template server does it (results renamed
  ``text``/``html``/``png``..., one pair of single quotes stripped from
  ``text/plain``, tracebacks joined, the count from ``execute_input``).
* ``:49983`` envd (under uvicorn): ``/process.Process/*`` is E2B's own
  generated Connect service (``ProcessASGIApplication``) with a ``start`` that
  runs the command as a local process; ``GET``/``POST /files`` read and write files.

Sandbox paths (``/home/user/...``) are mapped under a private root directory.
One fake serves one sandbox at a time, like debug mode itself.
"""

from __future__ import annotations

import asyncio
import email.parser
import email.policy
import json
import os
import queue
import shutil
import signal
import socketserver
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import uvicorn
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from e2b.envd.client_shared import ENVD_JSON_CODEC
from e2b.envd.process import process_pb
from e2b.envd.process.process_connect import Process, ProcessASGIApplication
from jupyter_client import KernelManager
from protobuf import Oneof

JUPYTER_PORT = 49999
ENVD_PORT = 49983


def ports_free() -> bool:
    import socket

    for port in (JUPYTER_PORT, ENVD_PORT):
        with socket.socket() as s:
            s.setsockopt(
                socket.SOL_SOCKET, socket.SO_REUSEADDR, 1
            )  # as the servers do; TIME_WAIT is fine
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


class _Context:
    """One code context: a real IPython kernel with its working directory."""

    def __init__(self, cwd: str, real_cwd: str) -> None:
        self.id = uuid.uuid4().hex
        self.cwd = cwd
        self.real_cwd = real_cwd
        self.lock = threading.Lock()
        self.generation = 0
        self.km = KernelManager(kernel_name="python3")
        self._start()

    def _start(self) -> None:
        env = {**os.environ, "MPLBACKEND": "module://matplotlib_inline.backend_inline"}
        self.km.start_kernel(cwd=self.real_cwd, env=env)
        self.kc = self.km.blocking_client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)

    def restart(self) -> None:
        self.generation += 1  # ends a stream still waiting on the old kernel
        self.kc.stop_channels()
        self.km.restart_kernel(now=True)
        self.kc = self.km.blocking_client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)

    def shutdown(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)

    def execute(self, code: str) -> Iterator[dict[str, Any]]:
        """E2B's NDJSON events for one execution, as the kernel produces them."""
        kc, generation = self.kc, self.generation
        msg_id = kc.execute(code, store_history=True, allow_stdin=False)
        accepted = False
        while True:
            if self.generation != generation:
                return  # restarted under us: the old kernel's stream is gone
            try:
                msg = kc.get_iopub_msg(timeout=0.5)
            except queue.Empty:
                continue
            except Exception:
                if self.generation != generation:
                    return
                raise
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            stamp = str(msg["header"].get("date", ""))
            if kind == "stream":
                yield {"type": content["name"], "text": content["text"], "timestamp": stamp}
            elif kind in ("display_data", "execute_result"):
                yield _result(content["data"], is_main=kind == "execute_result")
            elif kind == "error":
                yield {
                    "type": "error",
                    "name": content["ename"],
                    "value": content["evalue"],
                    "traceback": "".join(content["traceback"]),
                }
            elif kind == "execute_input":
                accepted = True
                yield {
                    "type": "number_of_executions",
                    "execution_count": content["execution_count"],
                }
            elif kind == "status" and content["execution_state"] == "idle" and accepted:
                return


def _result(data: dict[str, Any], is_main: bool) -> dict[str, Any]:
    data = dict(data)
    text = data.pop("text/plain", None)
    if text and text.startswith("'") and text.endswith("'"):
        text = text[1:-1]
    out = {"type": "result", "is_main_result": is_main, "text": text}
    for mime, key in (
        ("text/html", "html"),
        ("text/markdown", "markdown"),
        ("image/svg+xml", "svg"),
        ("image/png", "png"),
        ("image/jpeg", "jpeg"),
        ("application/pdf", "pdf"),
        ("text/latex", "latex"),
        ("application/json", "json"),
        ("application/javascript", "javascript"),
    ):
        if mime in data:
            out[key] = data.pop(mime)
    out["extra"] = data
    return {k: v for k, v in out.items() if v is not None}


class FakeE2B:
    """Both sandbox services of one fake E2B sandbox. Use as a context manager."""

    def __init__(self) -> None:
        self.root = tempfile.mkdtemp(prefix="fake-e2b-")
        self.contexts: dict[str, _Context] = {}
        self.requests: list[tuple[str, str]] = []
        self._servers: list[socketserver.BaseServer] = []

    def path(self, sandbox_path: str) -> str:
        """The local path of a path inside the fake sandbox."""
        return os.path.join(self.root, sandbox_path.lstrip("/"))

    # ── lifecycle ──────────────────────────────────────────────────────────
    def __enter__(self) -> FakeE2B:
        jupyter = ThreadingHTTPServer(("127.0.0.1", JUPYTER_PORT), _jupyter_handler(self))
        self._servers.append(jupyter)
        threading.Thread(target=jupyter.serve_forever, daemon=True).start()
        config = uvicorn.Config(
            self._envd_app(), host="127.0.0.1", port=ENVD_PORT, log_level="warning", lifespan="off"
        )
        self._envd = uvicorn.Server(config)
        self._envd_thread = threading.Thread(target=self._envd.run, daemon=True)
        self._envd_thread.start()
        deadline = time.monotonic() + 10
        while not self._envd.started and time.monotonic() < deadline:
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()
        self._envd.should_exit = True
        self._envd_thread.join(timeout=10)
        for context in self.contexts.values():
            context.shutdown()
        shutil.rmtree(self.root, ignore_errors=True)

    # ── envd ───────────────────────────────────────────────────────────────
    def _envd_app(self):
        process_app = ProcessASGIApplication(_ProcessService(self), codecs=[ENVD_JSON_CODEC])

        async def app(scope, receive, send):
            path = scope["path"]
            self.requests.append((scope["method"], path))
            if path.startswith("/process.Process/"):
                return await process_app(scope, receive, send)
            if path == "/files":
                body = b""
                while True:
                    message = await receive()
                    body += message.get("body", b"")
                    if not message.get("more_body"):
                        break
                headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
                status, content_type, payload = self._files(
                    scope["method"],
                    parse_qs(scope["query_string"].decode()),
                    headers.get("content-type", ""),
                    body,
                )
            elif path == "/health":
                status, content_type, payload = 204, "text/plain", b""
            else:
                status, content_type, payload = (
                    404,
                    "application/json",
                    json.dumps({"code": 404}).encode(),
                )
            await send(
                {
                    "type": "http.response.start",
                    "status": status,
                    "headers": [
                        (b"content-type", content_type.encode()),
                        (b"content-length", str(len(payload)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": payload})

        return app

    def _files(
        self, method: str, params: dict, content_type: str, body: bytes
    ) -> tuple[int, str, bytes]:
        if method == "GET":
            target = self.path(params["path"][0])
            if not os.path.isfile(target):
                message = {"code": 404, "message": f"path '{params['path'][0]}' does not exist"}
                return 404, "application/json", json.dumps(message).encode()
            with open(target, "rb") as f:
                return 200, "application/octet-stream", f.read()
        if content_type.startswith("multipart/"):
            message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
                b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body
            )
            parts = [(p.get_filename(), p.get_payload(decode=True)) for p in message.iter_parts()]
        else:
            parts = [(params["path"][0], body)]
        written = []
        for name, data in parts:
            sandbox_path = params["path"][0] if "path" in params and len(parts) == 1 else name
            target = self.path(sandbox_path)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as f:
                f.write(data)
            written.append(
                {"name": os.path.basename(sandbox_path), "type": "file", "path": sandbox_path}
            )
        return 200, "application/json", json.dumps(written).encode()


class _ProcessService(Process):
    """envd's process service: ``start`` runs the command locally and streams its events."""

    def __init__(self, fake: FakeE2B) -> None:
        self.fake = fake

    async def start(self, request, ctx) -> AsyncIterator[process_pb.StartResponse]:
        config = request.process
        cwd = self.fake.path(config.cwd) if config.cwd else self.fake.root
        if not os.path.isdir(cwd):
            raise ConnectError(Code.INVALID_ARGUMENT, f"cwd '{config.cwd}' does not exist")
        args = [a.replace("/home/user", self.fake.path("/home/user")) for a in config.args]
        proc = await asyncio.create_subprocess_exec(
            config.cmd,
            *args,
            cwd=cwd,
            env={**os.environ, **dict(config.envs or {})},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        events: asyncio.Queue = asyncio.Queue()

        async def pump(stream, name: str) -> None:
            while chunk := await stream.read(1 << 16):
                await events.put((name, chunk))
            await events.put((name, None))

        pumps = [
            asyncio.create_task(pump(proc.stdout, "stdout")),
            asyncio.create_task(pump(proc.stderr, "stderr")),
        ]
        event = process_pb.ProcessEvent
        try:
            yield process_pb.StartResponse(
                event=event(event=Oneof("start", event.StartEvent(pid=proc.pid)))
            )
            open_streams = 2
            while open_streams:
                name, chunk = await events.get()
                if chunk is None:
                    open_streams -= 1
                    continue
                data = event.DataEvent(output=Oneof(name, chunk))
                yield process_pb.StartResponse(event=event(event=Oneof("data", data)))
            code = await proc.wait()
            end = event.EndEvent(exit_code=code, exited=True, status=f"exit status {code}")
            yield process_pb.StartResponse(event=event(event=Oneof("end", end)))
        finally:
            if proc.returncode is None:  # the client gave up (its timeout): kill the command
                os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
            for task in pumps:
                task.cancel()


def _jupyter_handler(fake: FakeE2B) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *args: Any) -> None:
            pass

        def _json(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> dict[str, Any]:
            length = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(length) or b"{}")

        def do_POST(self) -> None:
            path = urlparse(self.path).path
            fake.requests.append(("POST", path))
            if path == "/contexts":
                body = self._body()
                cwd = body.get("cwd") or "/home/user"
                os.makedirs(fake.path(cwd), exist_ok=True)
                context = _Context(cwd, fake.path(cwd))
                fake.contexts[context.id] = context
                self._json(
                    200,
                    {"id": context.id, "language": body.get("language") or "python", "cwd": cwd},
                )
            elif path.startswith("/contexts/") and path.endswith("/restart"):
                context = fake.contexts.get(path.split("/")[2])
                if context is None:
                    return self._json(404, {"error": "context not found"})
                context.restart()
                self._json(200, {})
            elif path == "/execute":
                body = self._body()
                context = fake.contexts.get(body.get("context_id") or "")
                if context is None:
                    return self._json(404, {"error": "context not found"})
                self.send_response(200)
                self.send_header("Content-Type", "application/x-ndjson")
                self.end_headers()
                if not context.lock.acquire(timeout=60):
                    return
                try:
                    for event in context.execute(body["code"]):
                        self.wfile.write(json.dumps(event).encode() + b"\n")
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out; the cell keeps running until a restart
                finally:
                    context.lock.release()
            else:
                self._json(404, {"error": f"no route {path}"})

        def do_DELETE(self) -> None:
            path = urlparse(self.path).path
            context = fake.contexts.pop(path.split("/")[-1], None)
            if context is not None:
                context.shutdown()
            self._json(200, {})

    return Handler


def wait_until_serving(timeout_s: float = 5.0) -> None:
    import socket

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", JUPYTER_PORT), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
