"""A local stand-in for CoreWeave Sandbox's gRPC API, served to the real ``cwsandbox`` SDK.

The servicer classes and messages are the SDK's own generated stubs
(``cwsandbox._proto.sandbox_pb2*``), so requests arrive exactly as the SDK
sends them. A sandbox here is a folder on this host, and ``StreamExec`` runs the
command as a real subprocess in it with stdin and stdout streamed, which is what
a backend needs to relay the slot runner's frames. Served on loopback over an
insecure channel: the SDK picks one for an ``http://`` ``CWSANDBOX_BASE_URL``.

A sandbox's folder is a ``fake_daytona_sandbox.FakeSandbox`` (as on the fake Daytona
and Runloop): its absolute paths ``/work``, ``/opt/analyst_env`` and ``/tmp`` are mapped
into the folder and ``python`` to this interpreter, so the slot runner's commands run
for real without touching the host; with ``deny_egress`` they get a fresh network
namespace when the tests run as root. Stdout and stderr stream separately, as
CoreWeave's ``ExecStreamOutput`` marks them. ``WriteFile``/``ReadFile`` map every
absolute path into the folder. Each ``CreateSandbox`` request is kept in ``created``
so tests can check the options a backend sent.

Not modelled: Kata isolation, resource limits (recorded, not enforced), templates, the
direct data plane (``ConnectSandbox`` answers ``UNIMPLEMENTED``, so the SDK uses the gateway).
"""

from __future__ import annotations

import queue
import shlex
import threading
import uuid
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from cwsandbox._proto import sandbox_pb2 as pb
from cwsandbox._proto import sandbox_pb2_grpc as pb_grpc
from fake_daytona_sandbox import FakeSandbox, kill_process, start_process

_SHELLS = ("sh", "bash", "/bin/sh", "/bin/bash")


class FakeCoreWeave(pb_grpc.SandboxServiceServicer):
    """Sandboxes as folders; every call must carry ``Authorization: Bearer <api_key>``."""

    def __init__(self, api_key: str) -> None:
        self.api_key = api_key
        self.sandboxes: dict[str, pb.Sandbox] = {}
        self.folders: dict[str, FakeSandbox] = {}
        self.created: list[Any] = []
        self.calls: list[str] = []
        self._server: grpc.Server | None = None
        self.base_url = ""

    def start(self) -> str:
        """Serve on a free loopback port; returns the ``CWSANDBOX_BASE_URL`` to use."""
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=32))
        pb_grpc.add_SandboxServiceServicer_to_server(self, self._server)
        port = self._server.add_insecure_port("127.0.0.1:0")
        self._server.start()
        self.base_url = f"http://127.0.0.1:{port}"
        return self.base_url

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(0)
        for folder in list(self.folders.values()):
            folder.destroy()
        self.folders.clear()

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
        self.created.append(request)
        self.sandboxes[sandbox.sandbox_id] = sandbox
        closed = request.sandbox.spec.network.deny_egress
        self.folders[sandbox.sandbox_id] = FakeSandbox({"networkBlockAll": closed}, {}, "")
        return sandbox

    def ConnectSandbox(self, request: Any, context: Any) -> Any:  # noqa: N802
        """No direct data plane here: the SDK takes ``UNIMPLEMENTED`` as its cue to send every
        call through the gateway (``cwsandbox/_direct.py``). Not counted in ``calls``."""
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "direct data plane not offered")

    def ListSandboxes(self, request: Any, context: Any) -> Any:  # noqa: N802
        self._authorise(context, "ListSandboxes")
        wanted = set(request.tags)
        found = [
            sandbox
            for sandbox in self.sandboxes.values()
            if wanted <= set(sandbox.spec.tags)
            and (request.show_terminated or sandbox.status.state == pb.STATE_RUNNING)
        ]
        return pb.ListSandboxesResponse(sandboxes=found)

    def GetSandbox(self, request: Any, context: Any) -> pb.Sandbox:  # noqa: N802
        self._authorise(context, "GetSandbox")
        return self._get(request.sandbox_id, context)

    def DeleteSandbox(self, request: Any, context: Any) -> Any:  # noqa: N802
        self._authorise(context, "DeleteSandbox")
        sandbox = self._get(request.sandbox_id, context)
        sandbox.status.state = pb.STATE_TERMINATED  # kept: the SDK polls it after a stop
        folder = self.folders.pop(request.sandbox_id, None)
        if folder is not None:
            folder.destroy()
        return pb.DeleteSandboxResponse(sandbox=sandbox)

    def _path(self, sandbox_id: str, path: str, context: Any) -> Path:
        self._get(sandbox_id, context)
        root = Path(self.folders[sandbox_id].root).resolve()
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
        folder = self.folders[init.sandbox_id]
        command = list(init.command)
        shell = len(command) == 3 and command[0] in _SHELLS and command[1] == "-c"
        proc = start_process(folder.argv(command[2] if shell else shlex.join(command)), folder.root)
        folder.sessions.setdefault("exec", {})[uuid.uuid4().hex] = _Running(proc)
        context.add_callback(lambda: kill_process(proc))  # the client hung up
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None

        def feed() -> None:
            assert proc.stdin is not None
            try:
                for request in requests:
                    if request.HasField("close"):
                        break
                    if request.HasField("stdin"):
                        proc.stdin.write(request.stdin)
                        proc.stdin.flush()
            except (BrokenPipeError, ValueError, grpc.RpcError):
                pass
            finally:
                try:
                    proc.stdin.close()
                except (BrokenPipeError, ValueError):
                    pass

        threading.Thread(target=feed, daemon=True).start()
        outputs: queue.Queue = queue.Queue()
        streams = (
            (proc.stdout, pb.ExecStreamOutput.STREAM_STDOUT),
            (proc.stderr, pb.ExecStreamOutput.STREAM_STDERR),
        )
        for pipe, stream in streams:
            threading.Thread(target=_pump, args=(pipe, stream, outputs), daemon=True).start()
        yield pb.ExecStreamResponse(ready=pb.ExecStreamReady())
        open_streams = len(streams)
        while open_streams:
            stream, chunk = outputs.get()
            if chunk is None:
                open_streams -= 1
            else:
                yield pb.ExecStreamResponse(output=pb.ExecStreamOutput(stream=stream, data=chunk))
        yield pb.ExecStreamResponse(exit=pb.ExecStreamExit(exit_code=proc.wait()))


def _pump(pipe: Any, stream: Any, outputs: queue.Queue) -> None:
    """Put ``pipe``'s chunks on ``outputs`` as ``(stream, chunk)``, then ``(stream, None)``."""
    while chunk := pipe.read1(65536):
        outputs.put((stream, chunk))
    outputs.put((stream, None))


class _Running:
    """A ``StreamExec`` process as ``FakeSandbox.destroy`` kills it (``.kill()``)."""

    def __init__(self, proc: Any) -> None:
        self.proc = proc

    def kill(self) -> None:
        kill_process(self.proc)
