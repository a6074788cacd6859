"""A fake Kubernetes API server with the Agent Sandbox controller, for the unmodified SDK.

Serves, on a loopback port, the subset of the API that ``k8s-agent-sandbox`` 1.0.8 and the
``kubernetes`` client call (request shapes from their source: ``k8s_helper.py``,
``sandbox_client.py``, ``kubernetes/stream/ws_client.py``):

- ``sandboxclaims`` (``extensions.agents.x-k8s.io/v1beta1``): create, get, list, watch
  (newline-delimited events from a ``resourceVersion``), delete; a created claim is checked
  against the vendored CRD schema, then bound by the fake controller to a new Sandbox from
  its warm pool (Ready, or ``WarmPoolNotFound``) the way the real controller reports it;
- ``sandboxwarmpools`` and ``sandboxtemplates``: get, seeded from
  ``deploy/kubernetes/agent-sandbox/``;
- ``sandboxes`` (``agents.x-k8s.io/v1beta1``): get;
- ``pods/{name}/exec``: the WebSocket channel protocol (``v4.channel.k8s.io``: one byte of
  channel, 0 stdin, 1 stdout, 2 stderr, 3 the final status), running the command as a local
  process whose ``/work`` is the pod's private directory: the real slot runner.

Every request must carry the kubeconfig's bearer token and is allowed only if the Role in
``deploy/kubernetes/agent-sandbox/rbac.yaml`` grants it, so the backend's tests also prove
the shipped Role is enough.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import uvicorn
import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "deploy" / "kubernetes" / "agent-sandbox"
sys.path.insert(0, str(ROOT / "tests" / "deploy" / "agent_sandbox_schemas"))
import crd_validation  # noqa: E402

EXT = "extensions.agents.x-k8s.io"
CORE = "agents.x-k8s.io"
TOKEN = "fake-token"


def _status(code: int, reason: str, message: str) -> JSONResponse:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    return JSONResponse(body, status_code=code)


class FakeAgentSandboxCluster:
    """One namespace of a cluster with Agent Sandbox installed. Use as a context manager."""

    def __init__(self, namespace: str = "analyst-env", *, rbac: Path = MANIFESTS / "rbac.yaml"):
        self.namespace = namespace
        self.root = tempfile.mkdtemp(prefix="fake-agent-sandbox-")
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}  # (plural, name) -> object
        self.requests: list[tuple[str, str, str]] = []  # (verb, resource, name)
        self.processes: dict[str, list[asyncio.subprocess.Process]] = {}  # pod -> execs
        self.rules = [
            r
            for d in yaml.safe_load_all(rbac.read_text())
            if d and d["kind"] == "Role"
            for r in d["rules"]
        ]
        self._rv = itertools.count(100)
        self._changed: asyncio.Event | None = None
        for name in ("sandboxtemplate.yaml", "sandboxwarmpool.yaml"):
            self.put(yaml.safe_load((MANIFESTS / name).read_text()))

    # ── objects ────────────────────────────────────────────────────────────
    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Store ``obj`` (a new resourceVersion) and wake the watches."""
        plural = obj["kind"].lower() + ("es" if obj["kind"] == "Sandbox" else "s")
        meta = obj.setdefault("metadata", {})
        meta["namespace"] = self.namespace
        meta.setdefault("uid", str(uuid.uuid4()))
        meta["resourceVersion"] = str(next(self._rv))
        self.objects[(plural, meta["name"])] = obj
        if self._changed is not None:
            self._changed.set()
        return obj

    def claims(self) -> list[dict[str, Any]]:
        return [o for (plural, _), o in self.objects.items() if plural == "sandboxclaims"]

    def work_dir(self, pod: str) -> str:
        return os.path.join(self.root, pod, "work")

    # ── lifecycle ──────────────────────────────────────────────────────────
    def __enter__(self) -> FakeAgentSandboxCluster:
        config = uvicorn.Config(
            self._app(),
            host="127.0.0.1",
            port=0,
            log_level="warning",
            lifespan="off",
            ws="websockets-sansio",
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        (sock,) = [s for server in self._server.servers for s in server.sockets]
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        return self

    def __exit__(self, *exc: object) -> None:
        for pod in list(self.processes):
            self._kill_pod(pod)
        self._server.should_exit = True
        self._thread.join(timeout=10)
        shutil.rmtree(self.root, ignore_errors=True)

    def kubeconfig(self, path: Path, token: str = TOKEN) -> Path:
        """Write a kubeconfig for this server (bearer-token user, namespace context)."""
        path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "fake",
                    "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
                    "users": [{"name": "fake", "user": {"token": token}}],
                    "contexts": [
                        {
                            "name": "fake",
                            "context": {
                                "cluster": "fake",
                                "user": "fake",
                                "namespace": self.namespace,
                            },
                        }
                    ],
                }
            )
        )
        return path

    # ── the API ────────────────────────────────────────────────────────────
    def _denied(self, headers: Any, group: str, resource: str, verb: str) -> JSONResponse | None:
        if headers.get("authorization") != f"Bearer {TOKEN}":
            return _status(401, "Unauthorized", "Unauthorized")
        for rule in self.rules:
            if (
                group in rule["apiGroups"]
                and resource in rule["resources"]
                and (verb in rule["verbs"])
            ):
                return None
        return _status(403, "Forbidden", f'{resource}.{group} is forbidden: cannot "{verb}"')

    def _app(self) -> Starlette:
        base = "/apis/{group}/v1beta1/namespaces/{ns}/{plural}"
        return Starlette(
            routes=[
                Route(base, self._collection, methods=["GET", "POST"]),
                Route(base + "/{name}", self._item, methods=["GET", "DELETE"]),
                WebSocketRoute("/api/v1/namespaces/{ns}/pods/{name}/exec", self._exec),
            ]
        )

    async def _collection(self, request: Request) -> Any:
        group, plural = request.path_params["group"], request.path_params["plural"]
        watching = request.query_params.get("watch") in ("true", "True", "1")
        verb = "create" if request.method == "POST" else ("watch" if watching else "list")
        denied = self._denied(request.headers, group, plural, verb)
        if denied is not None:
            return denied
        self._changed = self._changed or asyncio.Event()
        if request.method == "POST":
            return await self._create_claim(plural, await request.json())
        wanted = request.query_params.get("fieldSelector", "").removeprefix("metadata.name=")
        selector = dict(
            p.split("=", 1)
            for p in filter(None, request.query_params.get("labelSelector", "").split(","))
        )
        items = [
            o
            for (p, n), o in self.objects.items()
            if p == plural
            and (not wanted or n == wanted)
            and selector.items() <= o["metadata"].get("labels", {}).items()
        ]
        self.requests.append((verb, plural, wanted))
        if not watching:
            return JSONResponse(
                {"kind": "List", "apiVersion": f"{group}/v1beta1", "metadata": {}, "items": items}
            )
        since = int(request.query_params.get("resourceVersion") or 0)
        timeout = float(request.query_params.get("timeoutSeconds") or 30)
        return StreamingResponse(
            self._watch(plural, wanted, since, timeout), media_type="application/json"
        )

    async def _watch(self, plural: str, name: str, since: int, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        sent = since
        while time.monotonic() < deadline:
            assert self._changed is not None
            self._changed.clear()
            obj = self.objects.get((plural, name))
            if obj is None and sent > since:
                yield json.dumps({"type": "DELETED", "object": {"metadata": {"name": name}}}) + "\n"
                return
            if obj is not None and int(obj["metadata"]["resourceVersion"]) > sent:
                kind = "ADDED" if sent == 0 else "MODIFIED"
                sent = int(obj["metadata"]["resourceVersion"])
                yield json.dumps({"type": kind, "object": obj}) + "\n"
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), 0.2)

    async def _create_claim(self, plural: str, body: dict[str, Any]) -> JSONResponse:
        if plural != "sandboxclaims":
            return _status(405, "MethodNotAllowed", f"the fake creates sandboxclaims, not {plural}")
        try:
            crd_validation.validate(body)
        except Exception as exc:
            return _status(422, "Invalid", f"SandboxClaim is invalid: {exc}")
        name = body["metadata"]["name"]
        if ("sandboxclaims", name) in self.objects:
            return _status(409, "AlreadyExists", f'sandboxclaims "{name}" already exists')
        self.requests.append(("create", plural, name))
        claim = self.put(body)
        asyncio.get_running_loop().call_later(0.01, self._bind, name)
        return JSONResponse(claim, status_code=201)

    def _bind(self, claim_name: str) -> None:
        """The controller: adopt a sandbox from the claim's warm pool and report it Ready."""
        claim = self.objects.get(("sandboxclaims", claim_name))
        if claim is None:
            return
        pool = claim["spec"]["warmPoolRef"]["name"]
        if ("sandboxwarmpools", pool) not in self.objects:
            claim["status"] = {
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "False",
                        "reason": "WarmPoolNotFound",
                        "message": f"warm pool {pool} not found",
                    }
                ]
            }
            self.put(claim)
            return
        sandbox_name = f"{pool}-{uuid.uuid4().hex[:5]}"
        os.makedirs(self.work_dir(sandbox_name))
        ready = {"type": "Ready", "status": "True", "reason": "DependenciesReady"}
        self.put(
            {
                "apiVersion": f"{CORE}/v1beta1",
                "kind": "Sandbox",
                "metadata": {"name": sandbox_name},
                "status": {"podIPs": ["10.0.0.7"], "conditions": [ready]},
            }
        )
        claim["status"] = {
            "sandbox": {"name": sandbox_name, "podIPs": ["10.0.0.7"]},
            "conditions": [ready],
        }
        self.put(claim)

    async def _item(self, request: Request) -> JSONResponse:
        group, plural = request.path_params["group"], request.path_params["plural"]
        name = request.path_params["name"]
        verb = "delete" if request.method == "DELETE" else "get"
        denied = self._denied(request.headers, group, plural, verb)
        if denied is not None:
            return denied
        self.requests.append((verb, plural, name))
        obj = self.objects.get((plural, name))
        if obj is None:
            return _status(404, "NotFound", f'{plural}.{group} "{name}" not found')
        if verb == "delete":
            del self.objects[(plural, name)]
            if plural == "sandboxclaims":  # shutdownPolicy Delete: the sandbox and pod go too
                sandbox = (obj.get("status") or {}).get("sandbox", {}).get("name")
                if sandbox:
                    self.objects.pop(("sandboxes", sandbox), None)
                    self._kill_pod(sandbox)
            assert self._changed is not None
            self._changed.set()
            return JSONResponse({"kind": "Status", "apiVersion": "v1", "status": "Success"})
        return JSONResponse(obj)

    def _kill_pod(self, pod: str) -> None:
        for proc in self.processes.pop(pod, []):
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(os.path.join(self.root, pod), ignore_errors=True)

    async def _exec(self, ws: WebSocket) -> None:
        pod = ws.path_params["name"]
        denied = self._denied(ws.headers, "", "pods/exec", "create")
        if denied is not None or ("sandboxes", pod) not in self.objects:
            await ws.close(code=1008)
            return
        offered = [p.strip() for p in ws.headers.get("sec-websocket-protocol", "").split(",")]
        if "v4.channel.k8s.io" not in offered:
            await ws.close(code=1002)
            return
        await ws.accept(subprotocol="v4.channel.k8s.io")
        argv = [sys.executable if a == "python" else a for a in ws.query_params.getlist("command")]
        argv = [self.work_dir(pod) if a == "/work" else a for a in argv]
        self.requests.append(("exec", "pods/exec", pod))
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        self.processes.setdefault(pod, []).append(proc)

        async def pump(stream: asyncio.StreamReader, channel: int) -> None:
            while chunk := await stream.read(1 << 16):
                await ws.send_bytes(bytes([channel]) + chunk)

        async def feed() -> None:
            assert proc.stdin is not None
            with contextlib.suppress(WebSocketDisconnect, ConnectionError, RuntimeError):
                while True:
                    data = await ws.receive_bytes()
                    if data[:1] == b"\x00":
                        proc.stdin.write(data[1:])
                        await proc.stdin.drain()
            proc.stdin.close()  # the client is gone: the runner sees EOF

        assert proc.stdout is not None and proc.stderr is not None
        feeding = asyncio.ensure_future(feed())
        with contextlib.suppress(Exception):
            await asyncio.gather(pump(proc.stdout, 1), pump(proc.stderr, 2))
        code = await proc.wait()
        status = (
            {"metadata": {}, "status": "Success"}
            if code == 0
            else {
                "metadata": {},
                "status": "Failure",
                "reason": "NonZeroExitCode",
                "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
            }
        )
        with contextlib.suppress(Exception):
            await ws.send_bytes(b"\x03" + json.dumps(status).encode())
            await ws.close()
        feeding.cancel()
