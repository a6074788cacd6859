"""A local fake of Runloop's REST API, for the unmodified ``runloop-api-client`` SDK.

The SDK is pointed at it with ``RUNLOOP_BASE_URL`` (``Runloop(base_url=...)``).
Paths and bodies follow the SDK 3.0.0 (``resources/devboxes/devboxes.py``,
``resources/devboxes/executions.py``, ``resources/blueprints.py``,
``resources/network_policies.py``): ``POST /v1/devboxes/create_and_await_running``,
``/v1/devboxes/{id}/upload_file`` (multipart ``path`` + ``file``), ``execute`` (run to
completion within the request here, so the SDK never needs ``wait_for_command``),
``execute_async`` (``attach_stdin``), ``executions/{e}/send_std_in`` (``text`` or
``signal``), ``executions/{e}/stream_stdout_updates`` (SSE ``data:`` events of
``{"output", "offset"}``, resumable from ``?offset=``), ``kill``, ``shutdown``;
blueprints go ``queued`` -> ``building`` -> ``build_complete`` (or ``failed`` with a
``failure_reason``). The work is real: a devbox is a ``fake_daytona_sandbox.FakeSandbox``
(a private directory, ``/work``, ``/opt/analyst_env``, ``/tmp`` mapped into it, ``python``
mapped to this interpreter, a fresh network namespace when root and the devbox's
network policy allows nothing), so our runner really runs.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import subprocess
import threading
import time
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

from fake_daytona_sandbox import FakeSandbox, kill_process, start_process
from loopback_api import LoopbackApi
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from analyst_env.server.local_server import free_port

_ids = itertools.count(1)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"message": message}, status_code=status)


class Execution:
    """One asynchronous execution: a local process, its stdout kept whole for offsets."""

    def __init__(self, devbox_id: str, argv: list[str], cwd: str) -> None:
        self.id = f"exe-{next(_ids)}"
        self.devbox_id = devbox_id
        self.proc = start_process(argv, cwd)
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.done = threading.Event()
        threading.Thread(
            target=self._read, args=(self.proc.stdout, self.stdout), daemon=True
        ).start()
        threading.Thread(
            target=self._read, args=(self.proc.stderr, self.stderr), daemon=True
        ).start()

    def _read(self, pipe: Any, into: bytearray) -> None:
        for chunk in iter(lambda: os.read(pipe.fileno(), 65536), b""):
            into += chunk
        if into is self.stdout:
            self.proc.wait()
            self.done.set()

    def view(self, devbox_id: str) -> dict:
        running = not self.done.is_set()
        return {
            "devbox_id": devbox_id, "execution_id": self.id,
            "status": "running" if running else "completed",
            "exit_status": None if running else self.proc.returncode,
        }  # fmt: skip

    def kill(self) -> None:
        kill_process(self.proc)


class FakeRunloop:
    """Runloop's API on one loopback port. Use as a context manager."""

    def __init__(self, api_key: str = "rl-test-key", build_s: float = 0.3) -> None:
        self.api_key = api_key
        self.build_s = build_s
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.blueprints: dict[str, dict] = {}
        self.policies: dict[str, dict] = {}
        self.devboxes: dict[str, dict] = {}
        self.boxes: dict[str, FakeSandbox] = {}
        self.executions: dict[str, Execution] = {}
        self.requests: list[tuple[str, str]] = []
        self.faults = SimpleNamespace(build_failure=None)

    # ── control plane ──────────────────────────────────────────────────────
    async def _list_policies(self, request: Request) -> Response:
        name = request.query_params.get("name")
        found = [p for p in self.policies.values() if name in (None, p["name"])]
        return JSONResponse({"network_policies": found, "has_more": False})

    async def _create_policy(self, request: Request) -> Response:
        body = await request.json()
        policy = {
            "id": f"np-{next(_ids)}", "name": body["name"], "create_time_ms": 0,
            "update_time_ms": 0, "egress": {
                "allow_all": bool(body.get("allow_all")),
                "allowed_hostnames": body.get("allowed_hostnames") or [],
                "allow_devbox_to_devbox": bool(body.get("allow_devbox_to_devbox")),
                "allow_agent_gateway": False, "allow_mcp_gateway": False,
                "allow_runloop_mirrors": False, "allowed_cidrs": [],
            },
        }  # fmt: skip
        self.policies[policy["id"]] = policy
        return JSONResponse(policy)

    async def _list_blueprints(self, request: Request) -> Response:
        name = request.query_params.get("name")
        found = [b for b in self.blueprints.values() if name in (None, b["name"])]
        return JSONResponse({"blueprints": found, "has_more": False})

    async def _get_blueprint(self, request: Request) -> Response:
        blueprint = self.blueprints.get(request.path_params["id"])
        return JSONResponse(blueprint) if blueprint else _error(404, "blueprint not found")

    async def _create_blueprint(self, request: Request) -> Response:
        body = await request.json()
        blueprint = {
            "id": f"bpt_{next(_ids)}", "name": body["name"], "create_time_ms": 0,
            "parameters": body, "state": "created", "status": "queued", "failure_reason": None,
        }  # fmt: skip
        self.blueprints[blueprint["id"]] = blueprint
        threading.Thread(target=self._build, args=(blueprint,), daemon=True).start()
        return JSONResponse(blueprint)

    def _build(self, blueprint: dict) -> None:
        time.sleep(self.build_s / 2)
        blueprint["status"] = "building"
        time.sleep(self.build_s / 2)
        dockerfile = blueprint["parameters"].get("dockerfile") or ""
        reason = self.faults.build_failure
        if not re.search(r"^FROM \S+", dockerfile, re.M):
            reason = "build_failed"
        elif re.search(r"^(COPY|ADD) ", dockerfile, re.M):
            reason = "build_failed"  # no build context is uploaded
        blueprint["status"], blueprint["failure_reason"] = (
            ("failed", reason) if reason else ("build_complete", None)
        )

    async def _create_devbox(self, request: Request) -> Response:
        body = await request.json()
        blueprint = self.blueprints.get(body.get("blueprint_id") or "")
        if blueprint is None or blueprint["status"] != "build_complete":
            return _error(400, "blueprint is not built")
        launch = body.get("launch_parameters") or {}
        policy = self.policies.get(launch.get("network_policy_id") or "")
        closed = policy is not None and not policy["egress"]["allow_all"]
        box = FakeSandbox({"networkBlockAll": closed}, {}, "")
        devbox = {
            "id": f"dbx_{next(_ids)}", "status": "running", "create_time_ms": 0,
            "blueprint_id": blueprint["id"], "launch_parameters": launch,
            "metadata": body.get("metadata") or {}, "capabilities": [], "state_transitions": [],
        }  # fmt: skip
        self.devboxes[devbox["id"]] = devbox
        self.boxes[devbox["id"]] = box
        return JSONResponse(devbox)

    def _box(self, request: Request) -> tuple[dict, FakeSandbox] | None:
        key = request.path_params.get("id") or request.path_params.get("devbox_id") or ""
        devbox = self.devboxes.get(key)
        if devbox is None or devbox["status"] != "running":
            return None
        return devbox, self.boxes[key]

    async def _shutdown(self, request: Request) -> Response:
        found = self._box(request)
        if found is None:
            return _error(404, "devbox not found")
        devbox, box = found
        for execution in self.executions.values():
            if execution.devbox_id == devbox["id"]:
                await asyncio.to_thread(execution.kill)
        await asyncio.to_thread(box.destroy)
        devbox["status"] = "shutdown"
        return JSONResponse(devbox)

    async def _upload(self, request: Request) -> Response:
        found = self._box(request)
        if found is None:
            return _error(404, "devbox not found")
        form = await request.form()
        target = found[1].path(str(form["path"]))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        upload: Any = form["file"]
        with open(target, "wb") as f:
            f.write(await upload.read())
        return JSONResponse({})

    async def _execute(self, request: Request) -> Response:
        found = self._box(request)
        if found is None:
            return _error(404, "devbox not found")
        box, body = found[1], await request.json()
        done = await asyncio.to_thread(
            subprocess.run, box.argv(body["command"]), cwd=box.path("/work"), capture_output=True
        )
        return JSONResponse({
            "devbox_id": found[0]["id"], "execution_id": body.get("command_id") or "exe-sync",
            "status": "completed", "exit_status": done.returncode,
            "stdout": done.stdout.decode("utf-8", "replace"),
            "stderr": done.stderr.decode("utf-8", "replace"),
        })  # fmt: skip

    async def _execute_async(self, request: Request) -> Response:
        found = self._box(request)
        if found is None:
            return _error(404, "devbox not found")
        box, body = found[1], await request.json()
        os.makedirs(box.path("/work"), exist_ok=True)
        execution = Execution(found[0]["id"], box.argv(body["command"]), box.path("/work"))
        if not body.get("attach_stdin"):
            assert execution.proc.stdin is not None
            execution.proc.stdin.close()
        self.executions[execution.id] = execution
        return JSONResponse(execution.view(found[0]["id"]))

    def _execution(self, request: Request) -> Execution | None:
        found = self._box(request)
        execution = self.executions.get(request.path_params["execution_id"])
        if found is None or execution is None or execution.devbox_id != found[0]["id"]:
            return None
        return execution

    async def _send_std_in(self, request: Request) -> Response:
        execution, body = self._execution(request), await request.json()
        if execution is None:
            return _error(404, "execution not found")
        if bool(body.get("text")) == bool(body.get("signal")):
            return _error(400, "supply exactly one of nonempty text or a signal")
        stdin = execution.proc.stdin
        assert stdin is not None
        try:
            if body.get("signal") == "EOF":
                stdin.close()
            elif body.get("signal") == "INTERRUPT":
                execution.proc.send_signal(2)
            else:
                await asyncio.to_thread(lambda: (stdin.write(body["text"].encode()), stdin.flush()))
        except (OSError, ValueError):
            return _error(409, "the execution's stdin is closed")
        return JSONResponse({"success": True})

    async def _kill(self, request: Request) -> Response:
        execution = self._execution(request)
        if execution is None:
            return _error(404, "execution not found")
        await asyncio.to_thread(execution.kill)
        return JSONResponse(execution.view(request.path_params["devbox_id"]))

    async def _stream_stdout(self, request: Request) -> Response:
        execution = self._execution(request)
        if execution is None:
            return _error(404, "execution not found")
        start = int(request.query_params.get("offset") or 0)

        async def events() -> AsyncIterator[bytes]:
            sent = start
            while True:
                finished = execution.done.is_set()
                data = bytes(execution.stdout[sent:])
                if data:
                    sent += len(data)  # where a resumed stream starts (the SDK resends it)
                    event = {"output": data.decode("utf-8", "replace"), "offset": sent}
                    yield f"data: {json.dumps(event)}\n\n".encode()
                elif finished:
                    return
                else:
                    await asyncio.sleep(0.005)

        return StreamingResponse(events(), media_type="text/event-stream")

    # ── server ─────────────────────────────────────────────────────────────
    def _app(self) -> Starlette:
        def guarded(handler: Any) -> Any:
            async def endpoint(request: Request) -> Response:
                self.requests.append((request.method, request.url.path))
                if request.headers.get("authorization") != f"Bearer {self.api_key}":
                    return _error(401, "Invalid API key")
                return await handler(request)

            return endpoint

        create = "/v1/devboxes/create_and_await_running"
        box, exe = "/v1/devboxes/{id}", "/v1/devboxes/{devbox_id}/executions/{execution_id}"
        routes = [
            Route("/v1/network-policies", guarded(self._list_policies), methods=["GET"]),
            Route("/v1/network-policies", guarded(self._create_policy), methods=["POST"]),
            Route("/v1/blueprints", guarded(self._list_blueprints), methods=["GET"]),
            Route("/v1/blueprints", guarded(self._create_blueprint), methods=["POST"]),
            Route("/v1/blueprints/{id}", guarded(self._get_blueprint), methods=["GET"]),
            Route(create, guarded(self._create_devbox), methods=["POST"]),
            Route(box + "/shutdown", guarded(self._shutdown), methods=["POST"]),
            Route(box + "/upload_file", guarded(self._upload), methods=["POST"]),
            Route(box + "/execute", guarded(self._execute), methods=["POST"]),
            Route(box + "/execute_async", guarded(self._execute_async), methods=["POST"]),
            Route(exe + "/send_std_in", guarded(self._send_std_in), methods=["POST"]),
            Route(exe + "/kill", guarded(self._kill), methods=["POST"]),
            Route(exe + "/stream_stdout_updates", guarded(self._stream_stdout), methods=["GET"]),
        ]  # fmt: skip
        return Starlette(routes=routes)

    def __enter__(self) -> FakeRunloop:
        self._api = LoopbackApi(self._app(), self.port, "Runloop API")
        self._api.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for execution in self.executions.values():
            execution.kill()
        for box in self.boxes.values():
            box.destroy()
        self._api.stop()
