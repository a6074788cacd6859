"""A local fake of the Azure Container Apps sandbox data plane, for the unmodified SDK.

``azure-containerapps-sandbox`` 0.1.0b4 refuses endpoints that are not ``https://``
and azure-core refuses bearer tokens over plain HTTP, so the fake serves TLS on
loopback with a certificate made per run; the SDK's ``requests`` transport trusts it
through ``REQUESTS_CA_BUNDLE`` (``ca_bundle``). Paths and bodies follow the SDK's
source (``_operations/_sandbox_ops.py``, ``_operations/_file_ops.py``,
``_operations/_image_ops.py``, ``_sandbox_client.py``), all under
``/subscriptions/{s}/resourceGroups/{rg}/sandboxGroups/{g}`` with ``api-version``:
``PUT sandboxes`` (``Creating``, then ``Running`` at the next GET), ``GET``/``DELETE
sandboxes/{id}``, ``POST .../executeShellCommand`` (the command runs to its end within
the request), ``PUT``/``GET .../files?path=``, ``PUT diskimages`` (``Building`` then
``Ready``, or ``Failed`` with a ``message``), ``GET diskimages[/{id}]``. The work is
real: a sandbox is a ``fake_daytona_sandbox.FakeSandbox`` (a private directory with
``/work``, ``/opt/analyst_env`` and ``/tmp`` mapped into it, ``python`` mapped to this
interpreter, a fresh network namespace when root and the egress policy denies all).
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import itertools
import os
import signal
import subprocess
import tempfile
import threading
import time
from types import SimpleNamespace
from typing import Any

import uvicorn
from fake_daytona_sandbox import FakeSandbox
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from analyst_env.server.local_server import free_port

API_VERSION = "2026-02-01-preview"
GROUP = "/subscriptions/{sub}/resourceGroups/{rg}/sandboxGroups/{group}"
_ids = itertools.count(1)
#: Set in the environment of every command a sandbox runs, naming the sandbox.
MARKER = "FAKE_AZURE_SANDBOX"


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def self_signed(directory: str) -> tuple[str, str]:
    """A certificate and key for ``127.0.0.1`` and ``localhost`` (PEM paths)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fake-azure")])
    now = datetime.datetime.now(datetime.UTC)
    names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
    with open(cert_path, "wb") as out:
        out.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as out:
        out.write(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    return cert_path, key_path


class StaticToken:
    """An azure-core ``TokenCredential`` that hands out one fixed token (the fake's)."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.scopes: list[tuple[str, ...]] = []

    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        from azure.core.credentials import AccessToken

        self.scopes.append(scopes)
        return AccessToken(self.token, int(time.time()) + 3600)


class FakeAzureSandboxes:
    """One sandbox group of the data plane on a loopback TLS port. Use as a context manager."""

    def __init__(
        self,
        token: str = "aca-test-token",
        subscription: str = "sub-1",
        resource_group: str = "rg-1",
        group: str = "group-1",
        build_s: float = 0.3,
    ) -> None:
        self.token = token
        self.subscription, self.resource_group, self.group = subscription, resource_group, group
        self.build_s = build_s
        self.port = free_port()
        self.endpoint = f"https://127.0.0.1:{self.port}"
        self.sandboxes: dict[str, dict] = {}
        self.boxes: dict[str, FakeSandbox] = {}
        self.images: dict[str, dict] = {}
        self.requests: list[tuple[str, str, dict]] = []
        self.faults = SimpleNamespace(build_failure=None)
        self._dir = tempfile.mkdtemp(prefix="fake-azure-")
        self.ca_bundle, self._key = self_signed(self._dir)

    def credential(self) -> StaticToken:
        return StaticToken(self.token)

    def backend_options(self) -> dict[str, Any]:
        """``AzureSandboxBackend``'s keyword arguments for this group (short long-polls)."""
        return {
            "endpoint": self.endpoint, "subscription_id": self.subscription,
            "resource_group": self.resource_group, "sandbox_group": self.group,
            "registry": "registry.example/team", "credential": self.credential(),
            "poll_wait_s": 5.0,
        }  # fmt: skip

    # ── sandboxes ──────────────────────────────────────────────────────────
    async def _create_sandbox(self, request: Request) -> Response:
        body = await request.json()
        source = (body.get("sourcesRef") or {}).get("diskImage") or {}
        image = self.images.get(source.get("id") or "")
        if not source.get("isPublic") and (image is None or image["status"]["state"] != "Ready"):
            return _error(400, "DiskImageNotReady", f"disk image {source} is not ready")
        closed = ((body.get("egressPolicy") or {}).get("defaultAction") or "Allow") == "Deny"
        box = FakeSandbox({"networkBlockAll": closed}, {}, "")
        sandbox = {
            "id": f"sbx-{next(_ids)}", "state": "Creating", "labels": body.get("labels") or {},
            "resources": body.get("resources") or {}, "sourcesRef": body.get("sourcesRef"),
            "egressPolicy": body.get("egressPolicy"), "environment": body.get("environment") or {},
        }  # fmt: skip
        self.sandboxes[sandbox["id"]] = sandbox
        self.boxes[sandbox["id"]] = box
        return JSONResponse(sandbox, status_code=201)

    def _sandbox(self, request: Request) -> dict | None:
        return self.sandboxes.get(request.path_params["id"])

    async def _get_sandbox(self, request: Request) -> Response:
        sandbox = self._sandbox(request)
        if sandbox is None:
            return _error(404, "NotFound", "sandbox not found")
        if sandbox["state"] == "Creating":  # Running from the second look on
            sandbox["state"] = "Running"
            return JSONResponse({**sandbox, "state": "Creating"})
        return JSONResponse(sandbox)

    async def _delete_sandbox(self, request: Request) -> Response:
        sandbox = self.sandboxes.pop(request.path_params["id"], None)
        if sandbox is None:
            return _error(404, "NotFound", "sandbox not found")
        box = self.boxes.pop(sandbox["id"], None)
        if box is not None:
            await asyncio.to_thread(_destroy, sandbox["id"], box)
        return Response(status_code=202)

    async def _exec(self, request: Request) -> Response:
        sandbox, body = self._sandbox(request), await request.json()
        if sandbox is None or sandbox["state"] != "Running":
            return _error(409, "SandboxNotRunning", "the sandbox is not running")
        box = self.boxes[sandbox["id"]]
        cwd = box.path(body.get("workingDirectory") or "/work")
        env = {**os.environ, MARKER: sandbox["id"]}
        done = await asyncio.to_thread(
            subprocess.run, box.argv(body["command"]), cwd=cwd, capture_output=True,
            stdin=subprocess.DEVNULL, start_new_session=True, env=env,
        )  # fmt: skip
        return JSONResponse(
            {
                "exitCode": done.returncode,
                "stdout": done.stdout.decode("utf-8", "replace"),
                "stderr": done.stderr.decode("utf-8", "replace"),
            }
        )

    async def _files(self, request: Request) -> Response:
        sandbox = self._sandbox(request)
        if sandbox is None:
            return _error(404, "NotFound", "sandbox not found")
        path = self.boxes[sandbox["id"]].path(request.query_params["path"])
        if request.method == "PUT":
            data = await request.body()
            if request.query_params.get("createDirs") == "true":
                os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as out:
                out.write(data)
            return Response(status_code=204)
        if not os.path.isfile(path):
            return _error(404, "NotFound", f"{request.query_params['path']} not found")
        with open(path, "rb") as source:
            return Response(source.read(), media_type="application/octet-stream")

    # ── disk images ────────────────────────────────────────────────────────
    async def _create_image(self, request: Request) -> Response:
        body = await request.json()
        image = {
            "id": f"img-{next(_ids)}", "labels": body.get("labels") or {},
            "image": body.get("image"), "status": {"state": "Pending"},
        }  # fmt: skip
        self.images[image["id"]] = image
        threading.Thread(target=self._build, args=(image,), daemon=True).start()
        return JSONResponse(image, status_code=201)

    def _build(self, image: dict) -> None:
        time.sleep(self.build_s / 2)
        image["status"] = {"state": "Building"}
        time.sleep(self.build_s / 2)
        reason = self.faults.build_failure
        image["status"] = (
            {"state": "Failed", "message": reason} if reason else {"state": "Ready"}
        )  # fmt: skip

    async def _list_images(self, request: Request) -> Response:
        return JSONResponse({"value": list(self.images.values())})

    async def _get_image(self, request: Request) -> Response:
        image = self.images.get(request.path_params["id"])
        return JSONResponse(image) if image else _error(404, "NotFound", "disk image not found")

    async def _delete_image(self, request: Request) -> Response:
        found = self.images.pop(request.path_params["id"], None)
        return Response(status_code=202 if found else 404)

    # ── server ─────────────────────────────────────────────────────────────
    def _app(self) -> Starlette:
        def guarded(handler: Any) -> Any:
            async def endpoint(request: Request) -> Response:
                self.requests.append((request.method, request.url.path, dict(request.query_params)))
                if request.headers.get("authorization") != f"Bearer {self.token}":
                    return _error(401, "Unauthorized", "invalid bearer token")
                if request.query_params.get("api-version") != API_VERSION:
                    return _error(400, "UnsupportedApiVersion", "api-version is required")
                return await handler(request)

            return endpoint

        group = GROUP.format(sub=self.subscription, rg=self.resource_group, group=self.group)
        sbx = group + "/sandboxes/{id}"
        routes = [
            Route(group + "/sandboxes", guarded(self._create_sandbox), methods=["PUT"]),
            Route(sbx, guarded(self._get_sandbox), methods=["GET"]),
            Route(sbx, guarded(self._delete_sandbox), methods=["DELETE"]),
            Route(sbx + "/executeShellCommand", guarded(self._exec), methods=["POST"]),
            Route(sbx + "/files", guarded(self._files), methods=["GET", "PUT"]),
            Route(group + "/diskimages", guarded(self._list_images), methods=["GET"]),
            Route(group + "/diskimages", guarded(self._create_image), methods=["PUT"]),
            Route(group + "/diskimages/{id}", guarded(self._get_image), methods=["GET"]),
            Route(group + "/diskimages/{id}", guarded(self._delete_image), methods=["DELETE"]),
        ]  # fmt: skip
        return Starlette(routes=routes)

    def __enter__(self) -> FakeAzureSandboxes:
        config = uvicorn.Config(
            self._app(), host="127.0.0.1", port=self.port, log_level="warning", lifespan="off",
            ssl_certfile=self.ca_bundle, ssl_keyfile=self._key,
        )  # fmt: skip
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the fake Azure sandbox API did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        while self.boxes:
            sandbox_id, box = self.boxes.popitem()
            _destroy(sandbox_id, box)
        self._server.should_exit = True
        self._server.force_exit = True
        self._thread.join(timeout=10)


def _destroy(sandbox_id: str, box: FakeSandbox) -> None:
    """Delete a sandbox as Azure does with its VM: end every process its commands started
    (detached ones too: each carries ``MARKER`` in its environment), then its directory."""
    tag = f"{MARKER}={sandbox_id}".encode() + b"\0"
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as source:
                if tag in source.read():
                    os.kill(int(pid), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            continue
    box.destroy()
