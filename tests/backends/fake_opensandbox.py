"""A fake OpenSandbox server and execd, driven by the real ``opensandbox`` SDK.

It serves the HTTP API the SDK 1.1.1 calls (paths and bodies from its
generated clients in ``opensandbox/api/{lifecycle,execd}``) and execd's pipe
WebSocket (``components/execd/PTY.md`` and ``pkg/web/model/pty_ws.go`` in
alibaba/OpenSandbox):

- ``GET /v1/sandboxes``, ``POST /v1/sandboxes`` (202), ``GET /v1/sandboxes/{id}``,
  ``DELETE /v1/sandboxes/{id}`` (204), ``GET /v1/sandboxes/{id}/endpoints/{port}``,
  all behind the ``OPEN-SANDBOX-API-KEY`` header when the fake has a key;
- per sandbox an execd: ``execd_standin.py`` started on its own loopback port with
  the sandbox's access token (``X-EXECD-ACCESS-TOKEN``, which the endpoint reply hands
  out as a header), serving ``GET /ping``, ``POST /pty``, ``DELETE /pty/{sid}`` and the
  pipe WebSocket ``/pty/{sid}/ws?pty=0`` in front of a real ``bash``.

Only the cloud part is fake: the sandbox's private directory stands in for the
container's filesystem (``/work`` and ``python`` in the first command line are mapped
to it and to this interpreter, as fake_modal maps them), and bash gets a fresh network
namespace when the sandbox was created with a deny-all egress policy and the tests run
as root.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

STANDIN = Path(__file__).with_name("execd_standin.py")

_ids = itertools.count(1)


@dataclass
class FakeBox:
    """One sandbox: its request, private directory, and its execd (port, token, process)."""

    id: str
    request: dict
    root: str
    token: str = field(default_factory=lambda: secrets.token_hex(8))
    port: int = 0
    execd: subprocess.Popen | None = None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _descendants(pid: int) -> list[int]:
    """Every process under ``pid`` (from /proc), parents before their children."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rpartition(")")[2].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


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
        """Kill what execd runs in ``box`` (as the out-of-memory killer would), leaving execd."""
        if box.execd is not None:
            for pid in _descendants(box.execd.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def _destroy(self, box: FakeBox) -> None:
        self.boxes.pop(box.id, None)
        self.kill_processes(box)
        if box.execd is not None:
            box.execd.kill()
            box.execd.wait()
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
            box.port = _free_port()
            deny = (body.get("networkPolicy") or {}).get("defaultAction") == "deny"
            box.execd = subprocess.Popen(
                [sys.executable, str(STANDIN), "--host", "127.0.0.1", "--port", str(box.port)]
                + ["--token", box.token, "--root", box.root]
                + (["--no-network"] if deny else []),
                stdout=subprocess.DEVNULL,
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
            # The SDK waits on execd's /ping, so a stand-in still starting is fine.
            return {
                "endpoint": f"127.0.0.1:{box.port}",
                "headers": {"X-EXECD-ACCESS-TOKEN": box.token},
            }

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
