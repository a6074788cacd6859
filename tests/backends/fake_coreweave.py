"""A local stand-in for CoreWeave Sandbox's gRPC API, served to the real ``cwsandbox`` SDK.

Run as a process of its own (``fake_coreweave_process.FakeCoreWeaveProcess`` starts it), never
imported by the tests: ``grpcio``'s threads must not live in the pytest process, whose forked
children (a verifier scoring an answer) would inherit their locks held. It prints the
``CWSANDBOX_BASE_URL`` to use on its first stdout line, serves until its stdin closes, and logs
every call as a JSON line to ``<root>/calls.jsonl`` (a create with its sandbox spec).

The servicer classes and messages are the SDK's own generated stubs
(``cwsandbox._proto.sandbox_pb2*``), so requests arrive exactly as the SDK sends them. A sandbox
is a folder under ``root``; its absolute paths (``/work``, ``/opt/analyst_env``, ``/tmp``) map
into the folder, and ``StreamExec`` runs ``sh -c`` commands as real local processes
(``fake_daytona_sandbox.shell_argv``) with stdin, stdout and stderr streamed. Served on loopback
over an insecure channel: the SDK picks one for an ``http://`` ``CWSANDBOX_BASE_URL``.

Not modelled: Kata isolation, resource limits, templates, discovery of runners (the SDK falls
back to the gateway when none is advertised). Deny-egress gets a fresh network namespace only
when the tests run as root.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import sys
import threading
import uuid
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
from cwsandbox._proto import sandbox_pb2 as pb
from cwsandbox._proto import sandbox_pb2_grpc as pb_grpc
from fake_daytona_sandbox import MAPPED, kill_process, shell_argv, start_process
from google.protobuf.json_format import MessageToDict

_STDOUT, _STDERR = pb.ExecStreamOutput.STREAM_STDOUT, pb.ExecStreamOutput.STREAM_STDERR


class FakeCoreWeave(pb_grpc.SandboxServiceServicer):
    """Sandboxes as folders under ``root``; every call must carry ``Bearer <api_key>``."""

    def __init__(self, api_key: str, root: str) -> None:
        self.api_key, self.root = api_key, root
        self.sandboxes: dict[str, pb.Sandbox] = {}
        self.folders: dict[str, str] = {}
        self.processes: dict[str, list] = {}
        self._log = threading.Lock()

    def _authorise(self, context: Any, method: str, **details: Any) -> None:
        with self._log, open(os.path.join(self.root, "calls.jsonl"), "a") as log:
            log.write(json.dumps({"method": method, **details}) + "\n")
        headers = dict(context.invocation_metadata())
        if headers.get("authorization") != f"Bearer {self.api_key}":
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "invalid API key")

    def _get(self, sandbox_id: str, context: Any) -> pb.Sandbox:
        if sandbox_id not in self.sandboxes:
            context.abort(grpc.StatusCode.NOT_FOUND, f"sandbox {sandbox_id} not found")
        return self.sandboxes[sandbox_id]

    def CreateSandbox(self, request: Any, context: Any) -> pb.Sandbox:  # noqa: N802 (gRPC name)
        self._authorise(context, "CreateSandbox", sandbox=MessageToDict(request.sandbox))
        sandbox = pb.Sandbox()
        sandbox.CopyFrom(request.sandbox)
        sandbox.sandbox_id = uuid.uuid4().hex[:12]
        sandbox.status.state = pb.STATE_RUNNING
        self.sandboxes[sandbox.sandbox_id] = sandbox
        folder = os.path.join(self.root, f"sandbox-{sandbox.sandbox_id}")
        for path in MAPPED:
            os.makedirs(folder + path, exist_ok=True)
        self.folders[sandbox.sandbox_id] = folder
        self.processes[sandbox.sandbox_id] = []
        return sandbox

    def GetSandbox(self, request: Any, context: Any) -> pb.Sandbox:  # noqa: N802
        self._authorise(context, "GetSandbox")
        return self._get(request.sandbox_id, context)

    def ListSandboxes(self, request: Any, context: Any) -> Any:  # noqa: N802
        self._authorise(context, "ListSandboxes")
        running = [s for s in self.sandboxes.values() if s.status.state == pb.STATE_RUNNING]
        return pb.ListSandboxesResponse(sandboxes=running)

    def DeleteSandbox(self, request: Any, context: Any) -> Any:  # noqa: N802
        self._authorise(context, "DeleteSandbox")
        sandbox = self._get(request.sandbox_id, context)
        sandbox.status.state = pb.STATE_TERMINATED  # kept: the SDK polls it after a stop
        for proc in self.processes.pop(request.sandbox_id, []):
            kill_process(proc)
        shutil.rmtree(self.folders.pop(request.sandbox_id, ""), ignore_errors=True)
        return pb.DeleteSandboxResponse(sandbox=sandbox)

    def _path(self, sandbox_id: str, path: str, context: Any) -> str:
        self._get(sandbox_id, context)
        if not path.startswith(MAPPED) or ".." in path.split("/"):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"path {path} is not served here")
        return self.folders[sandbox_id] + path

    def WriteFile(self, request: Any, context: Any) -> Any:  # noqa: N802
        self._authorise(context, "WriteFile", path=request.path)
        target = self._path(request.sandbox_id, request.path, context)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as file:
            file.write(request.content)
        return pb.WriteFileResponse()

    def ReadFile(self, request: Any, context: Any) -> Any:  # noqa: N802
        self._authorise(context, "ReadFile", path=request.path)
        target = self._path(request.sandbox_id, request.path, context)
        if not os.path.isfile(target):
            context.abort(grpc.StatusCode.NOT_FOUND, f"no file {request.path}")
        with open(target, "rb") as file:
            return pb.ReadFileResponse(content=file.read())

    def StreamExec(self, requests: Iterator[Any], context: Any) -> Iterator[Any]:  # noqa: N802
        init = next(requests).init
        self._authorise(context, "StreamExec", command=list(init.command))
        sandbox = self._get(init.sandbox_id, context)
        if sandbox.status.state != pb.STATE_RUNNING:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "sandbox is not running")
        command = list(init.command)
        if command[:2] != ["sh", "-c"] or len(command) != 3:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the fake runs only sh -c COMMAND")
        folder = self.folders[init.sandbox_id]
        deny = sandbox.spec.network.deny_egress
        proc = start_process(shell_argv(folder, command[2], deny), folder)
        self.processes[init.sandbox_id].append(proc)
        threading.Thread(target=_feed, args=(requests, proc), daemon=True).start()
        yield pb.ExecStreamResponse(ready=pb.ExecStreamReady())
        chunks: queue.Queue = queue.Queue()
        for pipe, stream in ((proc.stdout, _STDOUT), (proc.stderr, _STDERR)):
            threading.Thread(target=_read, args=(pipe, stream, chunks), daemon=True).start()
        open_pipes = 2
        while open_pipes:
            stream, chunk = chunks.get()
            if not chunk:
                open_pipes -= 1
                continue
            yield pb.ExecStreamResponse(output=pb.ExecStreamOutput(stream=stream, data=chunk))
        yield pb.ExecStreamResponse(exit=pb.ExecStreamExit(exit_code=proc.wait()))


def _feed(requests: Iterator[Any], proc: Any) -> None:
    """The exec's stdin requests into the process, until a close or the stream's end."""
    try:
        for request in requests:
            if request.HasField("close"):
                break
            if request.HasField("stdin"):
                proc.stdin.write(request.stdin)
                proc.stdin.flush()
    except (BrokenPipeError, ValueError, grpc.RpcError):
        pass
    try:
        proc.stdin.close()
    except (BrokenPipeError, ValueError):
        pass


def _read(pipe: Any, stream: int, chunks: queue.Queue) -> None:
    while chunk := pipe.read1(65536):
        chunks.put((stream, chunk))
    chunks.put((stream, b""))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--root", required=True, help="where sandboxes' folders and the log go")
    args = parser.parse_args()
    fake = FakeCoreWeave(args.api_key, args.root)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=32))
    pb_grpc.add_SandboxServiceServicer_to_server(fake, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"http://127.0.0.1:{port}", flush=True)
    sys.stdin.read()  # serve until the tests close our stdin
    server.stop(0)
    for processes in fake.processes.values():
        for proc in processes:
            kill_process(proc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
