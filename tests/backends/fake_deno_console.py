"""The console half of the fake Deno API (``fake_deno``): volumes and snapshots over REST.

Paths and bodies from deno-sandbox 0.16.0 (``volumes.py``, ``snapshots.py``, ``console.py``):
``POST /api/v2/volumes`` (``slug``, ``region``, ``capacity``, ``from``), ``GET``/``DELETE
/api/v2/volumes/{id or slug}``, ``POST /api/v2/volumes/{id}/snapshot`` (``slug``),
``GET /api/v2/snapshots`` (a JSON array) and ``GET /api/v2/snapshots/{id or slug}``; errors
are ``{"code", "message"}``. Deno's rules the backend must respect are enforced: a slug is
taken once (409), a volume boots only if made from a bootable snapshot, and a volume still
attached to a running sandbox cannot be snapshotted (409).
"""

from __future__ import annotations

import itertools
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

BUILTIN = "builtin:debian-13"
_ids = itertools.count(1)


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"code": code, "message": message}, status_code=status)


class ConsoleState:
    """Volumes and snapshots, shared with the data plane (which boots from them)."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.volumes: dict[str, dict[str, Any]] = {}
        self.snapshots: dict[str, dict[str, Any]] = {}
        self.attached: dict[str, int] = {}  # volume id -> running sandboxes booted on it
        self.requests: list[tuple[str, str]] = []
        self.unavailable_once: str | None = None  # a path answered once with 503

    def find(self, table: dict[str, dict[str, Any]], key: str) -> dict[str, Any] | None:
        return table.get(key) or next((v for v in table.values() if v["slug"] == key), None)

    async def create_volume(self, request: Request) -> Response:
        body = await request.json()
        if self.find(self.volumes, body["slug"]) is not None:
            return _error(409, "VOLUME_ALREADY_EXISTS", f"volume {body['slug']} exists")
        base = body.get("from")
        bootable = base == BUILTIN or (base is not None and self.find(self.snapshots, base))
        if base is not None and not bootable:
            return _error(404, "SNAPSHOT_NOT_FOUND", f"no snapshot {base}")
        volume = {
            "id": f"vol_ord_{next(_ids)}", "slug": body["slug"], "region": body["region"],
            "capacity": body["capacity"], "estimated_allocated_size": 0,
            "estimated_flattened_size": 0, "is_bootable": bool(bootable),
            "base_snapshot": {"id": "builtin", "slug": base} if base else None,
        }  # fmt: skip
        self.volumes[volume["id"]] = volume
        return JSONResponse(volume)

    async def get_volume(self, request: Request) -> Response:
        volume = self.find(self.volumes, request.path_params["key"])
        return JSONResponse(volume) if volume else _error(404, "NOT_FOUND", "no such volume")

    async def delete_volume(self, request: Request) -> Response:
        volume = self.find(self.volumes, request.path_params["key"])
        if volume is None:
            return _error(404, "NOT_FOUND", "no such volume")
        del self.volumes[volume["id"]]
        return JSONResponse({})

    async def snapshot_volume(self, request: Request) -> Response:
        volume = self.find(self.volumes, request.path_params["key"])
        if volume is None:
            return _error(404, "NOT_FOUND", "no such volume")
        if self.attached.get(volume["id"]):
            return _error(409, "VOLUME_IN_USE", "the volume is attached to a running sandbox")
        body = await request.json()
        if self.find(self.snapshots, body["slug"]) is not None:
            return _error(409, "SNAPSHOT_ALREADY_EXISTS", f"snapshot {body['slug']} exists")
        snapshot = {
            "id": f"snp_ord_{next(_ids)}", "slug": body["slug"], "region": volume["region"],
            "allocated_size": 1, "flattened_size": 1, "is_bootable": volume["is_bootable"],
            "base_snapshot": volume["base_snapshot"], "volume": volume["id"],
        }  # fmt: skip
        self.snapshots[snapshot["id"]] = snapshot
        return JSONResponse(snapshot)

    async def list_snapshots(self, request: Request) -> Response:
        limit = int(request.query_params.get("limit") or 100)
        return JSONResponse(list(self.snapshots.values())[:limit])

    async def get_snapshot(self, request: Request) -> Response:
        snapshot = self.find(self.snapshots, request.path_params["key"])
        return JSONResponse(snapshot) if snapshot else _error(404, "NOT_FOUND", "no such snapshot")

    def app(self) -> Starlette:
        def guarded(handler: Any) -> Any:
            async def endpoint(request: Request) -> Response:
                self.requests.append((request.method, request.url.path))
                if request.headers.get("authorization") != f"Bearer {self.token}":
                    return _error(401, "UNAUTHORIZED", "invalid API token")
                if request.url.path == self.unavailable_once:
                    self.unavailable_once = None
                    return _error(503, "UNAVAILABLE", "try again later")
                return await handler(request)

            return endpoint

        volume = "/api/v2/volumes/{key}"
        routes = [
            Route("/api/v2/volumes", guarded(self.create_volume), methods=["POST"]),
            Route(volume, guarded(self.get_volume), methods=["GET"]),
            Route(volume, guarded(self.delete_volume), methods=["DELETE"]),
            Route(volume + "/snapshot", guarded(self.snapshot_volume), methods=["POST"]),
            Route("/api/v2/snapshots", guarded(self.list_snapshots), methods=["GET"]),
            Route("/api/v2/snapshots/{key}", guarded(self.get_snapshot), methods=["GET"]),
        ]  # fmt: skip
        return Starlette(routes=routes)
