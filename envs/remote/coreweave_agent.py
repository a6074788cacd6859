"""The process that owns every ``cwsandbox`` call of the coreweave backend.

The SDK speaks gRPC, and ``grpcio`` starts threads that hold locks of their own. A server
that forks (a verifier scoring an answer in a forked child, ``verifiers/bounded.py``) copies
those locks held, with no thread left to release them, and the child hangs. So the SDK never
runs in the server: the backend starts ``python -m analyst_env.envs.remote.coreweave_agent``
(a clean interpreter, ``coreweave_link.CoreWeaveAgent``) and speaks to it in JSON lines.

Each stdin line is a request ``{"id": n, "op": ..., ...}``, answered by one stdout line
``{"id": n, "ok": result}`` or ``{"id": n, "error": text, "refused": bool}`` (``refused``: the
service said no, as to a wrong key). A live process (``op: "open"``) sends its output as
``{"stream": n, "out": text}`` lines, its stderr as ``{"stream": n, "err": text}``, and
``{"stream": n, "end": reason}`` last. Requests run on threads of their own, so one slow
sandbox never holds up another's. At end of input every sandbox still held is stopped.
The credentials are the SDK's own variables (``CWSANDBOX_API_KEY``, ``CWSANDBOX_BASE_URL``).
``cwsandbox`` is imported when ``serve`` starts, not with this module: importing every module
of the package (the doctest walk) must not load gRPC into that process either.
"""

from __future__ import annotations

import base64
import json
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cwsandbox import Sandbox

#: Every sandbox this backend creates carries this tag (``count`` counts only those).
TAG = "analyst-env"
#: The requests a backend may make (the ``Agent`` methods of those names).
OPS = frozenset({"count", "create", "write", "run", "open", "send", "close_stream", "delete"})


class Agent:
    """The sandboxes and live processes of one backend, and the SDK calls on them."""

    def __init__(self, sdk: ModuleType, emit: Callable[[dict], None]) -> None:
        self.sdk = sdk
        self.emit = emit
        self.sandboxes: dict[str, Sandbox] = {}
        self.processes: dict[int, Any] = {}

    def count(self, timeout_s: float) -> int:
        """The first authenticated call: how many of our sandboxes are running."""
        return len(self.sdk.Sandbox.list(tags=[TAG], timeout_seconds=timeout_s).result(timeout_s))

    def create(
        self, image: str, cpus: str, memory: str, lifetime_s: float, timeout_s: float
    ) -> str:
        sandbox = self.sdk.Sandbox.run(
            container_image=image,
            resources=self.sdk.ResourceOptions(limits={"cpu": cpus, "memory": memory}),
            network=self.sdk.NetworkOptions(deny_egress=True, deny_ingress=True),
            max_lifetime_seconds=lifetime_s,
            tags=[TAG],
            request_timeout_seconds=timeout_s,
        )
        sandbox.wait(timeout=timeout_s)
        sandbox_id = str(sandbox.sandbox_id)
        self.sandboxes[sandbox_id] = sandbox
        return sandbox_id

    def write(self, sandbox: str, path: str, data: str, timeout_s: float) -> None:
        contents = base64.b64decode(data)
        self.sandboxes[sandbox].write_file(path, contents).result(timeout_s)

    def run(self, sandbox: str, command: str, timeout_s: float) -> list:
        process = self.sandboxes[sandbox].exec(["sh", "-c", command], timeout_seconds=timeout_s)
        done = process.result(timeout_s)
        return [done.returncode, done.stderr + done.stdout]

    def open(self, sandbox: str, command: str, stream: int, timeout_s: float) -> None:
        process = self.sandboxes[sandbox].exec(["sh", "-c", command], stdin=True)
        self.processes[stream] = process
        threading.Thread(target=self._pump, args=(stream, process), daemon=True).start()

    def _pump(self, stream: int, process: Any) -> None:
        def errors() -> None:
            for text in process.stderr:
                self.emit({"stream": stream, "err": text})

        threading.Thread(target=errors, daemon=True).start()
        reason = "the process's output ended"
        try:
            for text in process.stdout:
                self.emit({"stream": stream, "out": text})
        except Exception as exc:
            reason = f"the CoreWeave exec stream failed: {exc}"
        self.emit({"stream": stream, "end": reason})

    def send(self, stream: int, text: str, timeout_s: float) -> None:
        self.processes[stream].stdin.write(text.encode("ascii")).result(timeout_s)

    def close_stream(self, stream: int, timeout_s: float) -> None:
        process = self.processes.pop(stream, None)
        if process is not None:
            try:
                process.stdin.close().result(timeout_s)
            finally:
                process.cancel()

    def delete(self, sandbox: str, timeout_s: float) -> None:
        held = self.sandboxes.pop(sandbox, None)
        if held is not None:
            held.stop(missing_ok=True).result(timeout_s)

    def stop_all(self) -> None:
        for sandbox in list(self.sandboxes):
            try:
                self.delete(sandbox, 30.0)
            except Exception:
                pass


def serve(lines: Any, write: Callable[[str], None]) -> None:
    """Answer every request line of ``lines``; stop our sandboxes at end of input."""
    import cwsandbox

    lock = threading.Lock()

    def emit(message: dict) -> None:
        with lock:
            write(json.dumps(message) + "\n")

    agent = Agent(cwsandbox, emit)

    def answer(request: dict) -> None:
        reply: dict[str, Any] = {"id": request.pop("id")}
        try:
            op = request.pop("op")
            if op not in OPS:
                raise ValueError(f"no such request: {op!r}")
            reply["ok"] = getattr(agent, op)(**request)
        except Exception as exc:
            refused = isinstance(exc, cwsandbox.exceptions.CWSandboxAuthenticationError)
            reply.update(error=f"{type(exc).__name__}: {exc}", refused=refused)
        emit(reply)

    with ThreadPoolExecutor(max_workers=64, thread_name_prefix="coreweave-call") as calls:
        for line in lines:
            if line.strip():
                calls.submit(answer, json.loads(line))
    agent.stop_all()


def main() -> int:
    replies = sys.stdout
    sys.stdout = sys.stderr  # whatever else prints goes to stderr, never between replies

    def write(text: str) -> None:
        replies.write(text)
        replies.flush()

    serve(sys.stdin, write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
