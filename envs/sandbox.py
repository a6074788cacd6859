"""The sandbox interface every backend implements (local fork server, Docker, Modal, E2B).

An episode gets one ``Sandbox``: a persistent Python kernel (IPython semantics)
with a private working directory holding copies of the task's files. A
``SandboxBackend`` starts sandboxes from a baked image and owns whatever is
shared between them (a zygote process, a container pool, an API client).

Errors follow two channels. Model code that raises, loops or prints too much is
*data*: it comes back inside ``CellResult``/``ShellResult``. Infrastructure that
fails (the kernel died, the backend is unreachable) raises ``SandboxError``.

``SandboxBackend`` is what every backend does: start a sandbox, close, and declare its
``capabilities`` (``envs/capabilities.py``). What only some backends have (warming an
image up, reporting the protections they enforce, starting without waiting, standbys,
baked packages, building their own artifacts with a ``SandboxBaker``) is an optional
protocol there, asked for by capability. A sandbox subclasses
``Sandbox`` for the defaults of ``helpers_defined``, ``stop_agent_processes`` and
``run_verifier`` (whose default refuses verification).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from analyst_env.envs.capabilities import BackendCapabilities
    from analyst_env.envs.recipes.recipe import Recipe

from pydantic import BaseModel, Field


class SandboxError(RuntimeError):
    """The sandbox itself failed (not the code running in it)."""


class SandboxClosedError(SandboxError):
    """The sandbox was closed; start a new one."""


class SandboxStartError(SandboxError):
    """The sandbox's kernel could not be started (raised by the first call that needed it,
    when ``start`` returned before its kernel ran); the episode cannot go on."""


class VerifierUnavailable(SandboxError):
    """The sandbox cannot run verify commands out of the agent's reach (its backend cannot stop
    every agent process, or the agent could write what the commands would run): verification
    is refused rather than run where the agent could answer for it."""


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

    @property
    def workdir(self) -> str:
        """Absolute path of the working directory inside the sandbox."""
        ...

    helpers_defined: bool = False
    """Kernels start with ``kernel_helpers.HELPER_SOURCE`` already run (the local
    zygote and the slot runner define it before forking); when False the
    environment runs it at reset."""

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

    def stop_agent_processes(self) -> None:
        """End the agent's part of the episode before it is scored: kill the kernel and every
        process it started (detached, double-forked, ``setsid``), then continue with a fresh
        kernel forked from the clean template (one no cell ever ran in) in the same working
        directory. Files stay; variables are gone. No cell may run afterwards.

        The default refuses: a backend that cannot do it must not run verify commands.

        Raises:
            VerifierUnavailable: This backend cannot stop every agent process.
            SandboxError: Stopping them failed.
        """
        raise VerifierUnavailable(
            f"{type(self).__name__} cannot stop the agent's processes before verification, "
            "so verify-command tasks are refused on it"
        )

    def run_verifier(self, command: str, *, verifier_dir: str, timeout_s: float) -> ShellResult:
        """Run a verify command with ``/bin/sh`` in the working directory, after
        ``stop_agent_processes``, with a clean environment (``verifier_env.clean_env``: a fixed
        ``PATH``, ``HOME`` and ``$VERIFIER_DIR`` at ``verifier_dir``), never the kernel's.

        Raises:
            VerifierUnavailable: ``stop_agent_processes`` was not called, or the sandbox's
                processes can write a directory the command trusts (its ``PATH``).
        """
        raise VerifierUnavailable(f"{type(self).__name__} cannot run verify commands")

    def close(self) -> None:
        """Kill the kernel and every process it started; remove the working directory."""
        ...


@runtime_checkable
class SandboxBaker(Protocol):
    """A backend that builds its own artifact (image, template) for each recipe."""

    def bake(
        self,
        recipe: Recipe,
        out_dir: Path,
        *,
        log: Callable[[str], None],
        progress: Callable[[float], None],
    ) -> None:
        """Build ``recipe``'s artifact and record it in ``out_dir`` (its manifest).

        Raises:
            Exception: The build failed; the message is shown as the build's error.
        """
        ...

    def is_built(self, out_dir: Path) -> bool:
        """Whether ``out_dir`` records a complete artifact of this backend."""
        ...


@runtime_checkable
class SandboxBackend(Protocol):
    """Starts sandboxes from baked images. One backend serves many episodes at once.

    What every backend does; the optional parts only some have are the protocols of
    ``envs/capabilities.py``. Implementations may subclass it.
    """

    name: str

    capabilities: BackendCapabilities
    """What its sandboxes can do (a persistent kernel, interrupt, file transfer, limits,
    network ...), declared so that callers and tests need not probe."""

    def start(
        self,
        image: str,
        *,
        files: dict[str, str],
        seed: int | None = None,
        env: dict[str, str] | None = None,
    ) -> Sandbox:
        """Start a fresh sandbox.

        A backend may return before the sandbox's kernel runs (the local backend
        does when no standby is ready, so that a burst of resets is not served one
        fork at a time): its first call then waits for the kernel, and raises
        ``SandboxStartError`` if it could not be started.

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
