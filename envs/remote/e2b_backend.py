"""The E2B backend: one E2B sandbox (a Firecracker microVM) per episode.

E2B sandboxes run their own Jupyter kernel, so this backend does not use the
slot runner: an episode is an ``E2BSandbox`` (``e2b_sandbox``), which maps
E2B's results into the common ``CellResult`` so the model reads the same text
as on the local backend; templates are built from ``e2b_template``.

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
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from analyst_env.envs.capabilities import BackendCapabilities
from analyst_env.envs.kernel.capture import DEFAULT_LIMIT_BYTES
from analyst_env.envs.recipes.recipe import Recipe
from analyst_env.envs.remote import artifacts, runner_image
from analyst_env.envs.remote.artifacts import BakesItself, write_manifest
from analyst_env.envs.remote.bounded import BackendUnavailable, call_within, import_sdk
from analyst_env.envs.remote.e2b_sandbox import WORKDIR, E2BSandbox
from analyst_env.envs.remote.e2b_template import template_builder
from analyst_env.envs.remote.options import Sizing, Timeouts, options_from_settings
from analyst_env.envs.remote.slots import read_task_files
from analyst_env.envs.sandbox import SandboxBackend, SandboxError

if TYPE_CHECKING:
    from analyst_env.envs.backends import BackendSettings


class E2BSandboxBackend(BakesItself, SandboxBackend):
    """Starts one E2B sandbox per episode from the recipe's template.

    Args:
        resolve: Maps an image name to its recipe.
        api_key: ``E2B_API_KEY``; not needed in E2B's debug mode (``E2B_DEBUG``).
        domain: ``E2B_DOMAIN`` for a self-hosted E2B.
        template: Use this template for every image instead of building per recipe.
        output_limit_bytes: stdout/stderr kept per cell or command.
        sdk: ``e2b_code_interpreter`` or a module with its API.
        sizing: Sizing when a recipe sets none (baked into its template).
        timeouts: ``connect_s`` bounds each template lookup and a new sandbox's first
            command; E2B kills a sandbox after ``sandbox_s``.

    Raises:
        BackendUnavailable: SDK or credentials missing.
    """

    name = "e2b"
    # A microVM per episode without internet; E2B's kernel cannot be interrupted (a cell
    # over its limit restarts it) nor its agent processes stopped before verification.
    capabilities = BackendCapabilities(interrupt=False, network="none")
    sizing = Sizing()
    timeouts = Timeouts(connect_s=30.0)

    def __init__(
        self,
        resolve: Callable[[str], Recipe],
        *,
        api_key: str | None,
        domain: str | None = None,
        template: str | None = None,
        output_limit_bytes: int = DEFAULT_LIMIT_BYTES,
        sdk: ModuleType | None = None,
        sizing: Sizing | None = None,
        timeouts: Timeouts | None = None,
    ) -> None:
        self.sdk = sdk if sdk is not None else import_sdk("e2b_code_interpreter", "e2b")
        import e2b

        self._core = e2b
        self.debug = e2b.ConnectionConfig(api_key=api_key, domain=domain).debug
        if not api_key and not self.debug:
            raise BackendUnavailable(
                "the e2b backend needs credentials: set E2B_API_KEY (and E2B_DOMAIN if self-hosted)"
            )
        self._opts: dict[str, Any] = {
            k: v for k, v in {"api_key": api_key, "domain": domain}.items() if v
        }
        self._resolve = resolve
        self.template = template
        self.sizing, self.timeouts = sizing or self.sizing, timeouts or self.timeouts
        self.output_limit_bytes = output_limit_bytes
        self._templates: dict[str, str] = {}
        self._lock = threading.Lock()
        self._live: set[E2BSandbox] = set()
        self._closed = False

    def template_name(self, recipe: Recipe) -> str:
        """``analyst-env-<hash with sizing>-r<rev>``: one template per (recipe, sizing)."""
        sized = recipe.model_copy(
            update={
                "cpus": self._cpus(recipe),
                "memory_mb": self._memory(recipe),
                "disk_mb": recipe.disk_mb or self.sizing.disk_mb,
            }
        )
        return f"analyst-env-{runner_image.artifact_tag(sized, include_sizing=True)}".replace(
            ".", "-"
        )

    def _cpus(self, recipe: Recipe) -> int:
        return max(1, round(recipe.cpus or self.sizing.cpus))

    def _memory(self, recipe: Recipe) -> int:
        memory = recipe.memory_mb or self.sizing.memory_mb
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
            self.timeouts.connect_s,
            "E2B (template lookup)",
            lambda: self._core.Template.exists(name, **self._opts),
        )
        if not exists:
            disk = recipe.disk_mb or self.sizing.disk_mb
            disk_option: dict[str, Any] = {"min_free_disk_mb": disk} if disk else {}
            logs_option: dict[str, Any] = {}
            if log:
                logs_option["on_build_logs"] = lambda entry: log(str(entry))
            self._core.Template.build(
                template_builder(self._core, recipe),
                name,
                cpu_count=self._cpus(recipe),
                memory_mb=self._memory(recipe),
                **disk_option,
                **logs_option,
                **self._opts,
            )
        return name

    def bake(
        self,
        recipe: Recipe,
        out_dir: Path,
        *,
        log: Callable[[str], None],
        progress: Callable[[float], None],
    ) -> None:
        """Build ``recipe``'s template (the sandbox environments' build step) and record it in
        ``out_dir``."""
        name = self.template or self._ensure_template(recipe, log)
        write_manifest(out_dir, recipe, backend=self.name, artifact=name)
        log(f"e2b: template {name} is ready")

    def start(
        self,
        image: str,
        *,
        files: dict[str, str],
        seed: int | None = None,
        env: dict[str, str] | None = None,
    ) -> E2BSandbox:
        """Create an E2B sandbox, stage the task files, seed the kernel; see
        ``SandboxBackend.start``."""
        if self._closed:
            raise SandboxError("the backend is closed")
        payload = read_task_files(files)
        template = self._template_for(image)
        try:
            sandbox = self.sdk.Sandbox.create(
                template=template,
                timeout=self.timeouts.sandbox_s,
                envs=dict(env or {}),
                allow_internet_access=False,
                metadata={"app": "analyst-env", "image": image},
                **self._opts,
            )
        except Exception as exc:
            raise SandboxError(
                f"E2B could not create a sandbox from template {template!r}: {exc}"
            ) from exc
        try:
            sandbox.commands.run(f"mkdir -p {WORKDIR}", timeout=self.timeouts.connect_s)
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
                raise SandboxError(
                    f"seeding the kernel failed: {setup.error.name}: {setup.error.value}"
                )
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
    """The silent first cell: environment variables and RNG seeds, as the local kernel applies
    them."""
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
    sizing, timeouts, _ = options_from_settings(settings, E2BSandboxBackend, disk=True)
    return E2BSandboxBackend(
        artifacts.settings_resolver(settings, "e2b"),
        api_key=os.environ.get("E2B_API_KEY"),
        domain=os.environ.get("E2B_DOMAIN") or None,
        template=settings.e2b_template,
        sizing=sizing,
        timeouts=timeouts,
    )
