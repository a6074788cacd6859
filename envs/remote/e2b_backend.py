"""The E2B backend: one E2B sandbox (a Firecracker microVM) per episode.

E2B sandboxes run their own Jupyter kernel, so this backend does not use the
slot runner: cells go through ``run_code`` (in a code context rooted at the
episode's working directory), shell commands through ``commands.run`` and
files through the ``files`` API. ``Execution`` is mapped into the common
``CellResult`` so the model reads the same text as on the local backend.

Differences from the local kernel, all from E2B's side:

* E2B has no interrupt: a cell over its time limit gets its kernel restarted
  (``kernel_restarted``; variables lost, files kept).
* Silent cells still run as ordinary Jupyter cells there; the backend drops
  their outputs and keeps its own execution count, so the numbers the model
  sees match the local kernel's.
* E2B's server strips one pair of single quotes from a ``text/plain`` result
  (a string value ``'abc'`` arrives as ``abc``) and colours tracebacks; the
  colours are removed here.

Templates: one per (recipe, sizing), named ``analyst-env-<hash>-r<rev>``
(sizing is fixed when E2B builds a template), built with the Template SDK from
``code-interpreter-v1`` so the Jupyter server is there. ``template=`` pins an
existing template instead.
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from analyst_env.envs.local.capture import DEFAULT_LIMIT_BYTES, CappedBuffer
from analyst_env.envs.model_texts import timed_out_restarted_result
from analyst_env.envs.recipes.install_plan import install_plan
from analyst_env.envs.recipes.recipe import Recipe
from analyst_env.envs.remote import images
from analyst_env.envs.remote.bounded import BackendUnavailable, call_within, import_sdk
from analyst_env.envs.remote.images import built_by, write_manifest
from analyst_env.envs.sandbox import (
    CellResult,
    ExecutionError,
    Sandbox,
    SandboxBackend,
    SandboxBaker,
    SandboxClosedError,
    SandboxError,
    ShellResult,
)
from analyst_env.envs.task_files import check_task_file_name

if TYPE_CHECKING:
    from analyst_env.envs.backends import BackendSettings


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
    bundle = {mime: getattr(result, attr) for attr, mime in _MIME_OF.items() if getattr(result, attr, None) is not None}
    for key, value in (getattr(result, "extra", None) or {}).items():
        bundle.setdefault(key, value)
    return bundle


def cell_result(execution: Any, execution_count: int | None, limit: int = DEFAULT_LIMIT_BYTES) -> CellResult:
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


def template_builder(sdk_core: ModuleType, recipe: Recipe) -> Any:
    """The Template SDK definition of ``recipe`` (nothing is built until ``Template.build``)."""
    plan = install_plan(recipe)
    template = sdk_core.Template().from_template("code-interpreter-v1")
    if plan.apt_sources:
        template = template.run_cmd(
            f"echo {shlex.quote(plan.apt_sources)} > {images.APT_SOURCES_FILE}", user="root"
        )
    if plan.apt:
        template = template.apt_install(plan.apt, no_install_recommends=True)
    for step in plan.python_by_index:
        if step.index_url:
            quoted = " ".join(shlex.quote(p) for p in step.packages)
            index = shlex.quote(step.index_url)
            template = template.run_cmd(f"pip install --index-url {index} {quoted}", user="root")
        else:
            template = template.pip_install(step.packages)
    if plan.npm:
        if plan.npm_registry:
            registry = shlex.quote(plan.npm_registry)
            template = template.run_cmd(f"npm config set registry {registry}", user="root")
        template = template.npm_install(plan.npm, g=True)
    return template.set_envs({"MPLBACKEND": "Agg"})


class E2BSandbox(Sandbox):
    """One episode in one E2B sandbox. Created by ``E2BSandboxBackend.start``."""

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
        self.workdir: str = WORKDIR
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
                raise SandboxError(f"E2B sandbox {self._sandbox.sandbox_id} failed to run the cell: {exc}") from exc
            if silent:
                return cell_result(execution, None, self._limit).model_copy(update={"outputs": []})
            self._count += 1
            return cell_result(execution, count, self._limit)

    def run_shell(self, command: str, *, timeout_s: float) -> ShellResult:
        """Run ``command`` with ``commands.run`` in the working directory; see ``Sandbox.run_shell``."""
        with self._lock:
            self._check_open()
            try:
                result = self._sandbox.commands.run(command, cwd=self.workdir, envs=self._env, timeout=timeout_s)
            except self._sdk.CommandExitException as exc:
                result = exc
            except self._sdk.TimeoutException:
                return ShellResult(timed_out=True, stderr="")
            except Exception as exc:
                raise SandboxError(f"E2B sandbox {self._sandbox.sandbox_id} failed to run the command: {exc}") from exc
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


class E2BSandboxBackend(SandboxBackend):
    """Starts one E2B sandbox per episode from the recipe's template.

    Args:
        resolve: Maps an image name to its recipe.
        api_key: ``E2B_API_KEY``; not needed in E2B's debug mode (``E2B_DEBUG``).
        domain: ``E2B_DOMAIN`` for a self-hosted E2B.
        template: Use this template for every image instead of building per recipe.
        cpus, memory_mb, disk_mb: Sizing when a recipe sets none (baked into its template).
        sandbox_timeout_s: E2B kills a sandbox after this long.
        output_limit_bytes: stdout/stderr kept per cell or command.
        sdk: ``e2b_code_interpreter`` or a module with its API.

    Raises:
        BackendUnavailable: SDK or credentials missing.
    """

    name = "e2b"

    def __init__(
        self,
        resolve: Callable[[str], Recipe],
        *,
        api_key: str | None,
        domain: str | None = None,
        template: str | None = None,
        cpus: float = 1.0,
        memory_mb: int = 4096,
        disk_mb: int | None = None,
        sandbox_timeout_s: int = 3600,
        connect_timeout_s: float = 30.0,
        output_limit_bytes: int = DEFAULT_LIMIT_BYTES,
        sdk: ModuleType | None = None,
    ) -> None:
        self.sdk = sdk if sdk is not None else import_sdk("e2b_code_interpreter", "e2b")
        import e2b

        self._core = e2b
        self.debug = e2b.ConnectionConfig(api_key=api_key, domain=domain).debug
        if not api_key and not self.debug:
            raise BackendUnavailable("the e2b backend needs credentials: set E2B_API_KEY (and E2B_DOMAIN if self-hosted)")
        self._opts = {k: v for k, v in {"api_key": api_key, "domain": domain}.items() if v}
        self._resolve = resolve
        self.template = template
        self.cpus, self.memory_mb, self.disk_mb = cpus, memory_mb, disk_mb
        self.sandbox_timeout_s = sandbox_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.output_limit_bytes = output_limit_bytes
        self._templates: dict[str, str] = {}
        self._lock = threading.Lock()
        self._live: set[E2BSandbox] = set()
        self._closed = False

    def template_name(self, recipe: Recipe) -> str:
        """``analyst-env-<hash with sizing>-r<rev>``: one template per (recipe, sizing)."""
        sized = recipe.model_copy(
            update={"cpus": self._cpus(recipe), "memory_mb": self._memory(recipe), "disk_mb": recipe.disk_mb or self.disk_mb}
        )
        return f"analyst-env-{images.artifact_tag(sized, include_sizing=True)}".replace(".", "-")

    def _cpus(self, recipe: Recipe) -> int:
        return max(1, round(recipe.cpus or self.cpus))

    def _memory(self, recipe: Recipe) -> int:
        memory = recipe.memory_mb or self.memory_mb
        return memory + (memory % 2)  # E2B wants an even number

    def _template_for(self, image: str) -> str:
        if self.template is not None:
            return self.template
        recipe = self._resolve(image)
        name = self.template_name(recipe)
        with self._lock:
            if self._templates.get(image) != name:
                self._ensure_template(recipe)
                self._templates[image] = name
        return name

    def _ensure_template(self, recipe: Recipe, log: Callable[[str], None] | None = None) -> str:
        """Find ``recipe``'s template by name, or build it with the Template SDK."""
        name = self.template_name(recipe)
        exists = call_within(
            self.connect_timeout_s, "E2B (template lookup)", lambda: self._core.Template.exists(name, **self._opts)
        )
        if not exists:
            disk = recipe.disk_mb or self.disk_mb
            self._core.Template.build(
                template_builder(self._core, recipe),
                name,
                cpu_count=self._cpus(recipe),
                memory_mb=self._memory(recipe),
                **({"min_free_disk_mb": disk} if disk else {}),
                **({"on_build_logs": lambda entry: log(str(entry))} if log else {}),
                **self._opts,
            )
        return name

    def bake(self, recipe: Recipe, out_dir: Path, *, log: Callable[[str], None], progress: Callable[[float], None]) -> None:
        """Build ``recipe``'s template (the sandbox environments' build step) and record it in ``out_dir``."""
        name = self.template or self._ensure_template(recipe, log)
        write_manifest(out_dir, recipe, backend=self.name, artifact=name)
        log(f"e2b: template {name} is ready")

    def is_built(self, out_dir: Path) -> bool:
        """Whether ``out_dir``'s manifest records an E2B template."""
        return built_by(out_dir, self.name)

    def baker(self) -> SandboxBaker:
        """Itself: E2B builds a template for each recipe."""
        return self

    def start(
        self,
        image: str,
        *,
        files: dict[str, str],
        seed: int | None = None,
        env: dict[str, str] | None = None,
    ) -> E2BSandbox:
        """Create an E2B sandbox, stage the task files, seed the kernel; see ``SandboxBackend.start``."""
        if self._closed:
            raise SandboxError("the backend is closed")
        payload = {}
        for name, source in files.items():
            try:
                check_task_file_name(name)
            except ValueError as exc:
                raise SandboxError(str(exc)) from None
            try:
                with open(source, "rb") as f:
                    payload[name] = f.read()
            except OSError as exc:
                raise SandboxError(f"could not open task file {source!r}: {exc.strerror}") from exc
        template = self._template_for(image)
        try:
            sandbox = self.sdk.Sandbox.create(
                template=template,
                timeout=self.sandbox_timeout_s,
                envs=dict(env or {}),
                allow_internet_access=False,
                metadata={"app": "analyst-env", "image": image},
                **self._opts,
            )
        except Exception as exc:
            raise SandboxError(f"E2B could not create a sandbox from template {template!r}: {exc}") from exc
        try:
            # The same layout as a local slot: Harbor-style verifiers read logs/verifier/.
            sandbox.commands.run(f"mkdir -p {WORKDIR}/logs/verifier", timeout=self.connect_timeout_s)
            for name, data in payload.items():
                sandbox.files.write(posixpath.join(WORKDIR, name), data)
            context = sandbox.create_code_context(cwd=WORKDIR)
            episode = E2BSandbox(
                sandbox,
                context,
                sdk=self.sdk,
                output_limit_bytes=self.output_limit_bytes,
                env=dict(env or {}),
                on_close=self._forget,
            )
            setup = episode.run_cell(_setup_code(seed, env or {}), timeout_s=60, silent=True)
            if setup.error is not None:
                raise SandboxError(f"seeding the kernel failed: {setup.error.name}: {setup.error.value}")
        except BaseException as exc:
            try:
                sandbox.kill()
            except Exception:
                pass
            if isinstance(exc, SandboxError):
                raise
            raise SandboxError(f"E2B could not prepare the sandbox: {exc}") from exc
        with self._lock:
            self._live.add(episode)
        return episode

    def _forget(self, sandbox: E2BSandbox) -> None:
        with self._lock:
            self._live.discard(sandbox)

    def close(self) -> None:
        """Kill every sandbox this backend started and has not seen closed. Idempotent."""
        self._closed = True
        with self._lock:
            live, self._live = list(self._live), set()
        for sandbox in live:
            sandbox.close()


def _setup_code(seed: int | None, env: dict[str, str]) -> str:
    """The silent first cell: environment variables and RNG seeds, as the local kernel applies them."""
    return (
        "import os as __os, random as __random\n"
        f"__os.environ.update({dict(env)!r})\n"
        f"__random.seed({seed!r})\n"
        "try:\n"
        "    import numpy as __np\n"
        f"    __np.random.seed({'None' if seed is None else seed % 2**32})\n"
        "except ImportError:\n"
        "    pass\n"
        "del __os, __random\n"
    )


def from_settings(settings: BackendSettings) -> E2BSandboxBackend:
    """The backend ``make_backend`` builds: E2B credentials from ``E2B_API_KEY`` (and
    ``E2B_DOMAIN`` when self-hosted)."""
    return E2BSandboxBackend(
        images.settings_resolver(settings, "e2b"),
        api_key=os.environ.get("E2B_API_KEY"),
        domain=os.environ.get("E2B_DOMAIN") or None,
        template=settings.e2b_template,
        cpus=settings.cpu_limit,
        memory_mb=settings.memory_limit_mb,
        disk_mb=settings.disk_limit_mb,
        connect_timeout_s=settings.backend_connect_timeout_s,
    )
