"""A local fake of Prime Intellect's sandbox API, for the unmodified ``prime-sandboxes`` SDK.

The SDK is pointed at it with ``PRIME_API_BASE_URL`` (or the backend's ``base_url``).
Routes and bodies follow ``prime-sandboxes`` 0.5.1 (``sandbox.py``, ``images.py``,
``models.py``), all under ``/api/v1`` with ``Authorization: Bearer``:

- ``POST /sandbox`` (``CreateSandboxRequest`` plus ``vm`` and ``idempotency_key``; the
  reply is a camelCase ``Sandbox``), ``POST /sandbox/status:batchGet`` (what
  ``wait_for_creation`` polls), ``GET``/``DELETE /sandbox/{id}``, ``GET /sandbox`` (a page),
  ``POST /sandbox/{id}/auth`` (``gateway_url``, ``user_ns``, ``job_id``, ``token``,
  ``expires_at``);
- images: ``GET /images`` (``ImageListResponse``), ``POST /images/build`` (``build_id``,
  ``upload_url``, ``expires_in``, ``fullImagePath``), a ``PUT`` of the build context to that
  URL, ``POST /images/build/{id}/start``, ``GET /images/build/{id}``. The shape of the build
  status reply is not typed by the SDK (a ``dict``); this fake answers
  ``{"id", "status", "errorMessage", "fullImagePath"}``, an assumption the live test checks.

A sandbox goes ``PENDING`` then ``RUNNING``; its data plane is ``fake_prime_gateway`` on the
same port. A sandbox created with an empty ``network_allowlist`` (deny all) runs its
commands in a fresh network namespace when the tests run as root.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import re
import tarfile
import threading
import time
import uuid
from types import SimpleNamespace
from typing import Any

from fake_daytona_sandbox import FakeSandbox
from fake_prime_gateway import Gateway
from loopback_api import LoopbackApi
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from analyst_env.server.local_server import free_port

_ids = itertools.count(1)
_STAMP = "2026-01-01T00:00:00Z"


def _error(status: int, detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status)


class FakePrime:
    """Prime's control plane and gateway on one loopback port. Use as a context manager."""

    def __init__(self, api_key: str = "pi-test-key", build_s: float = 0.3) -> None:
        self.api_key = api_key
        self.build_s = build_s
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.sandboxes: dict[str, dict] = {}
        self.boxes: dict[str, FakeSandbox] = {}
        self.builds: dict[str, dict] = {}
        self.requests: list[tuple[str, str]] = []
        self.created: list[dict] = []
        self.gateway = Gateway(self.boxes)
        self.faults = SimpleNamespace(build_failure=None)

    # ── sandboxes ──────────────────────────────────────────────────────────
    async def _create(self, request: Request) -> Response:
        body = await request.json()
        self.created.append(body)
        if not body.get("vm") or not body.get("docker_image"):
            return _error(422, "docker_image is required")
        sid = f"sbx{uuid.uuid4().hex[:12]}"
        closed = body.get("network_allowlist") == []
        self.boxes[sid] = FakeSandbox({"networkBlockAll": closed}, {}, "")
        self.sandboxes[sid] = {
            "id": sid, "name": body["name"], "dockerImage": body["docker_image"],
            "cpuCores": body["cpu_cores"], "memoryGB": body["memory_gb"],
            "diskSizeGB": body.get("disk_size_gb") or 5, "diskMountPath": "/",
            "gpuCount": 0, "vm": True, "status": "PENDING",
            "networkAllowlist": body.get("network_allowlist"),
            "timeoutMinutes": body["timeout_minutes"], "labels": body.get("labels") or [],
            "createdAt": _STAMP, "updatedAt": _STAMP,
        }  # fmt: skip
        return JSONResponse(self.sandboxes[sid])

    async def _statuses(self, request: Request) -> Response:
        statuses, errors = [], []
        for sid in (await request.json())["sandbox_ids"]:
            sandbox = self.sandboxes.get(sid)
            if sandbox is None:
                errors.append({"sandbox_id": sid, "code": "NOT_FOUND", "message": "not found"})
                continue
            if sandbox["status"] == "PENDING":  # running from the second look on
                sandbox["status"] = "RUNNING"
                statuses.append({"sandbox_id": sid, "status": "PROVISIONING"})
            else:
                statuses.append({"sandbox_id": sid, "status": sandbox["status"]})
        return JSONResponse({"statuses": statuses, "errors": errors})

    async def _list(self, request: Request) -> Response:
        found = list(self.sandboxes.values())
        page = {"sandboxes": found, "total": len(found), "page": 1, "perPage": 50}
        return JSONResponse({**page, "hasNext": False})

    async def _get(self, request: Request) -> Response:
        sandbox = self.sandboxes.get(request.path_params["id"])
        return JSONResponse(sandbox) if sandbox else _error(404, "sandbox not found")

    async def _delete(self, request: Request) -> Response:
        sid = request.path_params["id"]
        sandbox, box = self.sandboxes.get(sid), self.boxes.pop(sid, None)
        if sandbox is None:
            return _error(404, "sandbox not found")
        await asyncio.to_thread(self.gateway.end_sandbox, sid)
        if box is not None:
            await asyncio.to_thread(box.destroy)
        sandbox["status"] = "TERMINATED"
        return JSONResponse({"success": True})

    async def _auth(self, request: Request) -> Response:
        sid = request.path_params["id"]
        if self.sandboxes.get(sid, {}).get("status") != "RUNNING":
            return _error(409, "sandbox is not running")
        return JSONResponse({
            "gateway_url": f"{self.base_url}/gw", "user_ns": "ns", "job_id": sid,
            "token": f"gw-{sid}", "expires_at": "2099-01-01T00:00:00Z",
        })  # fmt: skip

    # ── images ─────────────────────────────────────────────────────────────
    def _image_row(self, build: dict) -> dict:
        return {
            "id": build["id"], "artifactType": "VM_SANDBOX", "imageName": build["image_name"],
            "imageTag": build["image_tag"], "status": build["status"],
            "fullImagePath": build["fullImagePath"], "errorMessage": build["errorMessage"],
            "createdAt": _STAMP,
        }  # fmt: skip

    async def _images(self, request: Request) -> Response:
        search = request.query_params.get("search") or ""
        rows = [self._image_row(b) for b in self.builds.values() if search in b["image_name"]]
        return JSONResponse({"data": rows, "totalCount": len(rows), "offset": 0, "limit": 100})

    async def _build(self, request: Request) -> Response:
        body = await request.json()
        bid = f"bld{next(_ids)}"
        path = f"registry.prime.test/team/{body['image_name']}:{body['image_tag']}"
        self.builds[bid] = {
            "id": bid, "image_name": body["image_name"], "image_tag": body["image_tag"],
            "dockerfile_path": body.get("dockerfile_path") or "Dockerfile", "status": "PENDING",
            "fullImagePath": path, "errorMessage": None, "context": None,
        }  # fmt: skip
        upload = f"{self.base_url}/upload/{bid}"
        return JSONResponse({"build_id": bid, "upload_url": upload, "expires_in": 600,
                             "fullImagePath": path})  # fmt: skip

    async def _context(self, request: Request) -> Response:
        build = self.builds.get(request.path_params["id"])
        if build is None:
            return _error(404, "build not found")
        build["context"], build["status"] = await request.body(), "UPLOADING"
        return Response(status_code=200)

    async def _start_build(self, request: Request) -> Response:
        build = self.builds.get(request.path_params["id"])
        if build is None or build["context"] is None:
            return _error(400, "the build context was not uploaded")
        threading.Thread(target=self._run_build, args=(build,), daemon=True).start()
        return JSONResponse({"id": build["id"], "status": "BUILDING"})

    def _run_build(self, build: dict) -> None:
        build["status"] = "BUILDING"
        time.sleep(self.build_s)
        reason = self.faults.build_failure
        try:
            with tarfile.open(fileobj=io.BytesIO(build["context"]), mode="r:*") as tar:
                member = tar.extractfile(build["dockerfile_path"])
                dockerfile = member.read().decode() if member else ""
        except (tarfile.TarError, KeyError):
            dockerfile, reason = "", reason or "the context has no Dockerfile"
        if not reason and not re.search(r"^FROM \S+", dockerfile, re.M):
            reason = "the Dockerfile has no FROM"
        outcome = ("FAILED", reason) if reason else ("COMPLETED", None)
        build["status"], build["errorMessage"] = outcome

    async def _build_status(self, request: Request) -> Response:
        build = self.builds.get(request.path_params["id"])
        if build is None:
            return _error(404, "build not found")
        keys = ("id", "status", "errorMessage", "fullImagePath")
        return JSONResponse({key: build[key] for key in keys})

    # ── server ─────────────────────────────────────────────────────────────
    def _app(self) -> Starlette:
        def guarded(handler: Any, token: Any = None) -> Any:
            async def endpoint(request: Request) -> Response:
                self.requests.append((request.method, request.url.path))
                expected = token(request) if token else self.api_key
                if request.headers.get("authorization") != f"Bearer {expected}":
                    return _error(401, "Invalid API key")
                return await handler(request)

            return endpoint

        def gateway_token(request: Request) -> str:
            return f"gw-{request.path_params['sandbox_id']}"

        api, gw = "/api/v1", "/gw/ns/{sandbox_id}"
        routes = [
            Route(api + "/sandbox", guarded(self._create), methods=["POST"]),
            Route(api + "/sandbox", guarded(self._list), methods=["GET"]),
            Route(api + "/sandbox/status:batchGet", guarded(self._statuses), methods=["POST"]),
            Route(api + "/sandbox/{id}", guarded(self._get), methods=["GET"]),
            Route(api + "/sandbox/{id}", guarded(self._delete), methods=["DELETE"]),
            Route(api + "/sandbox/{id}/auth", guarded(self._auth), methods=["POST"]),
            Route(api + "/images", guarded(self._images), methods=["GET"]),
            Route(api + "/images/build", guarded(self._build), methods=["POST"]),
            Route(api + "/images/build/{id}", guarded(self._build_status), methods=["GET"]),
            Route(api + "/images/build/{id}/start", guarded(self._start_build), methods=["POST"]),
            Route("/upload/{id}", self._context, methods=["PUT"]),
            Route(gw + "/upload", guarded(self.gateway.upload, gateway_token), methods=["POST"]),
            Route(
                gw + "/command_session.CommandSession/{method}",
                guarded(self.gateway.rpc, gateway_token),
                methods=["POST"],
            ),
        ]
        return Starlette(routes=routes)

    def __enter__(self) -> FakePrime:
        self._api = LoopbackApi(self._app(), self.port, "Prime API")
        self._api.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.gateway.close()
        for box in self.boxes.values():
            box.destroy()
        self._api.stop()
