"""A local stand-in for CoreWeave Sandbox's gRPC API, served to the real ``cwsandbox`` SDK.

The servicer classes and messages are the SDK's own generated stubs
(``cwsandbox._proto.sandbox_pb2*``), so requests arrive exactly as the SDK
sends them. A sandbox here is a folder on this host, and ``StreamExec`` runs the
command as a real subprocess in it with stdin and stdout streamed, which is what
a backend needs to relay the slot runner's frames. Served on loopback over an
insecure channel: the SDK picks one for an ``http://`` ``CWSANDBOX_BASE_URL``.

Files: ``WriteFile``/``ReadFile`` map a sandbox's absolute paths into its folder.

Not modelled: Kata isolation, resource limits, network policy, templates,
discovery of runners (the SDK falls back to the gateway when none is advertised).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from cwsandbox._proto import sandbox_pb2 as pb
from cwsandbox._proto import sandbox_pb2_grpc as pb_grpc


class FakeCoreWeave(pb_grpc.SandboxServiceServicer):
    """Sandboxes as folders; every call must carry ``Authorization: Bearer <api_key>``."""

    def __init__(self, api_key: str) -> None:
        self.api_key = api_key
        self.sandboxes: dict[str, pb.Sandbox] = {}
        self.folders: dict[str, str] = {}
        self.calls: list[str] = []
        self._server: grpc.Server | None = None

    def start(self) -> str:
        """Serve on a free loopback port; returns the ``CWSANDBOX_BASE_URL`` to use."""
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        pb_grpc.add_SandboxServiceServicer_to_server(self, self._server)
        port = self._server.add_insecure_port("127.0.0.1:0")
        self._server.start()
        return f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(0)
        for folder in self.folders.values():
            shutil.rmtree(folder, ignore_errors=True)

    def _authorise(self, context: Any, method: str) -> None:
        self.calls.append(method)
        headers = dict(context.invocation_metadata())
        if headers.get("authorization") != f"Bearer {self.api_key}":
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "invalid API key")

    def _get(self, sandbox_id: str, context: Any) -> pb.Sandbox:
        if sandbox_id not in self.sandboxes:
            context.abort(grpc.StatusCode.NOT_FOUND, f"sandbox {sandbox_id} not found")
        return self.sandboxes[sandbox_id]

    def CreateSandbox(self, request: Any, context: Any) -> pb.Sandbox:  # noqa: N802 (gRPC name)
        self._authorise(context, "CreateSandbox")
        sandbox = pb.Sandbox()
        sandbox.CopyFrom(request.sandbox)
        sandbox.sandbox_id = uuid.uuid4().hex[:12]
        sandbox.status.state = pb.STATE_RUNNING
        self.sandboxes[sandbox.sandbox_id] = sandbox
        self.folders[sandbox.sandbox_id] = tempfile.mkdtemp(prefix="fake-coreweave-")
        return sandbox

    def GetSandbox(self, request: Any, context: Any) -> pb.Sandbox:  # noqa: N802
        self._authorise(context, "GetSandbox")
        return self._get(request.sandbox_id, context)

    def DeleteSandbox(self, request: Any, context: Any) -> Any:  # noqa: N802
        self._authorise(context, "DeleteSandbox")
        sandbox = self._get(request.sandbox_id, context)
        sandbox.status.state = pb.STATE_TERMINATED  # kept: the SDK polls it after a stop
        shutil.rmtree(self.folders.pop(request.sandbox_id, ""), ignore_errors=True)
        return pb.DeleteSandboxResponse(sandbox=sandbox)

    def _path(self, sandbox_id: str, path: str, context: Any) -> Path:
        self._get(sandbox_id, context)
        root = Path(self.folders[sandbox_id]).resolve()
        target = (root / path.lstrip("/")).resolve()
        if not target.is_relative_to(root):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"path {path} leaves the sandbox")
        return target

    def WriteFile(self, request: Any, context: Any) -> Any:  # noqa: N802
        self._authorise(context, "WriteFile")
        target = self._path(request.sandbox_id, request.path, context)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(request.content)
        return pb.WriteFileResponse()

    def ReadFile(self, request: Any, context: Any) -> Any:  # noqa: N802
        self._authorise(context, "ReadFile")
        target = self._path(request.sandbox_id, request.path, context)
        if not target.is_file():
            context.abort(grpc.StatusCode.NOT_FOUND, f"no file {request.path}")
        return pb.ReadFileResponse(content=target.read_bytes())

    def StreamExec(self, requests: Iterator[Any], context: Any) -> Iterator[Any]:  # noqa: N802
        self._authorise(context, "StreamExec")
        init = next(requests).init
        sandbox = self._get(init.sandbox_id, context)
        if sandbox.status.state != pb.STATE_RUNNING:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "sandbox is not running")
        proc = subprocess.Popen(
            list(init.command),
            cwd=self.folders[init.sandbox_id],
            env=dict(init.env) or None,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        assert proc.stdin is not None and proc.stdout is not None

        def feed() -> None:
            assert proc.stdin is not None
            try:
                for request in requests:
                    if request.HasField("close"):
                        break
                    if request.HasField("stdin"):
                        proc.stdin.write(request.stdin)
                        proc.stdin.flush()
            except (BrokenPipeError, grpc.RpcError):
                pass
            finally:
                try:
                    proc.stdin.close()
                except BrokenPipeError:
                    pass

        threading.Thread(target=feed, daemon=True).start()
        yield pb.ExecStreamResponse(ready=pb.ExecStreamReady())
        while chunk := proc.stdout.read1(65536):
            yield pb.ExecStreamResponse(
                output=pb.ExecStreamOutput(stream=pb.ExecStreamOutput.STREAM_STDOUT, data=chunk)
            )
        yield pb.ExecStreamResponse(exit=pb.ExecStreamExit(exit_code=proc.wait()))
