"""``E2BSandbox``: one episode in one E2B sandbox, and the mapping of E2B's results.

Cells go through ``run_code`` (in a code context rooted at the episode's working
directory), shell commands through ``commands.run`` and files through the
``files`` API. ``Execution`` is mapped into the common ``CellResult`` so the
model reads the same text as on the local backend (see ``e2b_backend`` for the
differences that come from E2B's side).
"""

from __future__ import annotations

import posixpath
import re
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from analyst_env.envs.kernel.capture import DEFAULT_LIMIT_BYTES, CappedBuffer
from analyst_env.envs.model_texts import timed_out_restarted_result
from analyst_env.envs.sandbox import (
    CellResult,
    ExecutionError,
    Sandbox,
    SandboxClosedError,
    SandboxError,
    ShellResult,
)

WORKDIR = "/home/user/work"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# Result attribute -> the Jupyter mime type it came from (E2B's server renames them).
_MIME_OF = {
    "text": "text/plain",
    "html": "text/html",
    "markdown": "text/markdown",
    "svg": "image/svg+xml",
    "png": "image/png",
    "jpeg": "image/jpeg",
    "pdf": "application/pdf",
    "latex": "text/latex",
    "json": "application/json",
    "javascript": "application/javascript",
}


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def _capped(parts: list[str], limit: int) -> str:
    buffer = CappedBuffer(limit)
    for part in parts:
        buffer.append(part.encode("utf-8", errors="replace"))
    return buffer.take()


def bundle_of(result: Any) -> dict[str, Any]:
    """A Jupyter mime bundle from an E2B ``Result`` (its ``extra`` keys kept as they are)."""
    bundle = {
        mime: getattr(result, attr)
        for attr, mime in _MIME_OF.items()
        if getattr(result, attr, None) is not None
    }
    for key, value in (getattr(result, "extra", None) or {}).items():
        bundle.setdefault(key, value)
    return bundle


def cell_result(
    execution: Any, execution_count: int | None, limit: int = DEFAULT_LIMIT_BYTES
) -> CellResult:
    """Map an E2B ``Execution`` into a ``CellResult``."""
    error = None
    if execution.error is not None:
        error = ExecutionError(
            name=execution.error.name,
            value=execution.error.value,
            traceback=strip_ansi(execution.error.traceback or "").rstrip("\n"),
        )
    return CellResult(
        stdout=_capped(execution.logs.stdout, limit),
        stderr=_capped(execution.logs.stderr, limit),
        outputs=[bundle_of(r) for r in execution.results],
        error=error,
        execution_count=execution_count,
    )


class E2BSandbox(Sandbox):
    """One episode in one E2B sandbox. Created by ``E2BSandboxBackend.start``."""

    @property
    def workdir(self) -> str:
        """The working directory: the same in every E2B sandbox."""
        return WORKDIR

    def __init__(
        self,
        sandbox: Any,
        context: Any,
        *,
        sdk: ModuleType,
        output_limit_bytes: int,
        env: dict[str, str],
        on_close: Callable[[E2BSandbox], None] = lambda sandbox: None,
    ) -> None:
        self._sandbox = sandbox
        self._env = dict(env)
        self._on_close = on_close
        self._context = context
        self._sdk = sdk
        self._limit = output_limit_bytes
        self._count = 0
        self._closed = False
        self._lock = threading.Lock()

    def run_cell(self, code: str, *, timeout_s: float, silent: bool = False) -> CellResult:
        """Execute ``code`` with ``run_code``; see ``Sandbox.run_cell``."""
        with self._lock:
            self._check_open()
            count = None if silent else self._count + 1
            try:
                execution = self._sandbox.run_code(code, context=self._context, timeout=timeout_s)
            except self._sdk.TimeoutException:
                self._restart_kernel()
                self._count = 0  # a fresh kernel counts from 1 again, as the local one does
                return timed_out_restarted_result(timeout_s)
            except Exception as exc:
                raise SandboxError(
                    f"E2B sandbox {self._sandbox.sandbox_id} failed to run the cell: {exc}"
                ) from exc
            if silent:
                return cell_result(execution, None, self._limit).model_copy(update={"outputs": []})
            self._count += 1
            return cell_result(execution, count, self._limit)

    def run_shell(self, command: str, *, timeout_s: float) -> ShellResult:
        """Run ``command`` with ``commands.run`` in the working directory; see
        ``Sandbox.run_shell``."""
        with self._lock:
            self._check_open()
            try:
                result = self._sandbox.commands.run(
                    command, cwd=self.workdir, envs=self._env, timeout=timeout_s
                )
            except self._sdk.CommandExitException as exc:
                result = exc
            except self._sdk.TimeoutException:
                return ShellResult(timed_out=True, stderr="")
            except Exception as exc:
                raise SandboxError(
                    f"E2B sandbox {self._sandbox.sandbox_id} failed to run the command: {exc}"
                ) from exc
            return ShellResult(
                stdout=_capped([result.stdout or ""], self._limit),
                stderr=_capped([result.stderr or ""], self._limit),
                exit_code=result.exit_code,
            )

    def put_file(self, path: str, data: bytes) -> None:
        """Write ``data`` under the working directory with the files API."""
        with self._lock:
            self._check_open()
            self._sandbox.files.write(self._inside(path), data)

    def get_file(self, path: str) -> bytes:
        """Read a file under the working directory. Raises ``FileNotFoundError``."""
        with self._lock:
            self._check_open()
            target = self._inside(path)
            try:
                return bytes(self._sandbox.files.read(target, format="bytes"))
            except self._sdk.NotFoundException as exc:
                raise FileNotFoundError(f"{path}: no such file in the sandbox") from exc

    def interrupt(self) -> None:
        """E2B cannot interrupt a cell; the time limit restarts the kernel instead."""

    def close(self) -> None:
        """Kill the E2B sandbox (the VM and everything in it). Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._sandbox.kill()
        except Exception:
            pass
        self._on_close(self)

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxClosedError("the sandbox is closed")

    def _inside(self, path: str) -> str:
        full = posixpath.normpath(posixpath.join(self.workdir, path))
        if not path or (full != self.workdir and not full.startswith(self.workdir + "/")):
            raise ValueError(f"path {path!r} is outside the working directory {self.workdir}")
        return full

    def _restart_kernel(self) -> None:
        try:
            self._sandbox.restart_code_context(self._context)
        except Exception as exc:
            raise SandboxError(f"E2B could not restart the kernel after a timeout: {exc}") from exc
