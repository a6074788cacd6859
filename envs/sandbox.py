"""The sandbox interface every backend implements (local fork server, Docker, Modal, E2B).

An episode gets one ``Sandbox``: a persistent Python kernel (IPython semantics)
with a private working directory holding copies of the task's files. A
``SandboxBackend`` starts sandboxes from a baked image and owns whatever is
shared between them (a zygote process, a container pool, an API client).

Errors follow two channels. Model code that raises, loops or prints too much is
*data*: it comes back inside ``CellResult``/``ShellResult``. Infrastructure that
fails (the kernel died, the backend is unreachable) raises ``SandboxError``.

A sandbox whose kernels start with ``kernel_helpers.HELPER_SOURCE`` already run
(the local backend defines it in the zygote, before forking) says so with a
``helpers_defined = True`` attribute; for any other the environment runs it at reset.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field


class SandboxError(RuntimeError):
    """The sandbox itself failed (not the code running in it)."""


class SandboxClosedError(SandboxError):
    """The sandbox was closed; start a new one."""


class ExecutionError(BaseModel):
    """An exception raised by a cell, as IPython reports it."""

    name: str = Field(description="Exception class name, e.g. 'KeyError'")
    value: str = Field(description="str() of the exception")
    traceback: str = Field(default="", description="Formatted traceback, without ANSI colours")


class CellResult(BaseModel):
    """Everything one cell produced. Same schema on every backend."""

    stdout: str = ""
    stderr: str = ""
    outputs: list[dict[str, Any]] = Field(
        default_factory=list,
        description=(
            "Rich results in order, as Jupyter mime bundles: the cell's value "
            "(displayhook), display() calls and matplotlib figures "
            "({'image/png': base64})"
        ),
    )
    error: ExecutionError | None = None
    execution_count: int | None = None
    timed_out: bool = Field(default=False, description="The cell hit its time limit")
    kernel_restarted: bool = Field(
        default=False,
        description="The kernel had to be replaced (it crashed or ignored an interrupt); "
        "all variables are gone, files remain",
    )

    @property
    def success(self) -> bool:
        return self.error is None and not self.timed_out


class ShellResult(BaseModel):
    """Result of one shell command run in the sandbox's working directory."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = Field(default=None, description="None if killed by the time limit")
    timed_out: bool = False


@runtime_checkable
class Sandbox(Protocol):
    """One episode's kernel and working directory.

    Calls are blocking and must not be made concurrently on one sandbox.
    ``close`` is idempotent and kills everything the episode started.
    """

    workdir: str
    """Absolute path of the working directory inside the sandbox."""

    def run_cell(self, code: str, *, timeout_s: float, silent: bool = False) -> CellResult:
        """Execute ``code`` in the persistent kernel.

        Args:
            code: Python source; IPython syntax (magics, ``!cmd``) is accepted.
            timeout_s: Wall-clock limit in seconds. At the limit the cell is
                interrupted (``KeyboardInterrupt``); if it does not stop, the
                kernel is replaced and ``kernel_restarted`` is set.
            silent: Run without touching the execution count, history or the
                notebook's visible outputs (used for the environment's helpers).
        """
        ...

    def run_shell(self, command: str, *, timeout_s: float) -> ShellResult:
        """Run ``command`` with ``/bin/sh`` in the working directory; kill its tree at the limit."""
        ...

    def put_file(self, path: str, data: bytes) -> None:
        """Write ``data`` to ``path`` (relative to the working directory, or absolute inside it)."""
        ...

    def get_file(self, path: str) -> bytes:
        """Read a file from the sandbox. Raises ``FileNotFoundError`` if it does not exist."""
        ...

    def interrupt(self) -> None:
        """Interrupt the running cell, if any (from another thread)."""
        ...

    def close(self) -> None:
        """Kill the kernel and every process it started; remove the working directory."""
        ...


class SandboxBackend(Protocol):
    """Starts sandboxes from baked images. One backend serves many episodes at once."""

    name: str

    def start(
        self,
        image: str,
        *,
        files: dict[str, str],
        seed: int | None = None,
        env: dict[str, str] | None = None,
    ) -> Sandbox:
        """Start a fresh sandbox.

        Args:
            image: Name of the baked environment image (``"default"`` for the
                project's standard data-analysis image).
            files: ``{relative name in the working directory: host path}``;
                each file is copied, so the episode may modify its copies.
            seed: Seeds Python's ``random`` and numpy's global RNG in the kernel;
                ``None`` draws fresh entropy per sandbox.
            env: Extra environment variables for the kernel and shell commands.

        Raises:
            SandboxError: The sandbox could not be started.
        """
        ...

    def close(self) -> None:
        """Stop every sandbox and shared process of this backend. Idempotent."""
        ...
