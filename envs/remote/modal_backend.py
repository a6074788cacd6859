"""The Modal backend: one Modal Sandbox per slot, running the slot runner.

Every SDK call goes through ``sdk``, the ``modal`` module by default: the
tests pass a fake with the same signatures (checked against the real SDK), so
this file is the whole adapter. Per image (recipe), the image is built once
from the recipe and published under ``analyst-env:<hash>-r<rev>``; later
servers find it with ``Image.from_name`` without rebuilding. Per slot a
Sandbox is created with the network blocked and the recipe's cpu and memory
as (request, limit) pairs, and one ``exec`` runs the runner with bytes
stdin/stdout carrying the framed requests. Episodes are forked inside it.

Sandboxes have no disk sizing on Modal; the recipe's ``disk_mb`` is ignored.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from analyst_env.envs.fork_env import SINGLE_THREADED_ENV
from analyst_env.envs.recipes.install_plan import install_plan
from analyst_env.envs.recipes.recipe import Recipe
from analyst_env.envs.remote import artifacts, runner_image
from analyst_env.envs.remote.bounded import BackendUnavailable, call_within, import_sdk
from analyst_env.envs.remote.channel import QueueChannel, StderrTail
from analyst_env.envs.remote.options import Sizing, Timeouts, WarmPool, options_from_settings
from analyst_env.envs.remote.runner_link import RunnerClient
from analyst_env.envs.remote.slots import BuildLog, RunnerBackend, Slot, before_half_life

if TYPE_CHECKING:
    from analyst_env.envs.backends import BackendSettings


_PACKAGE_DIR = Path(runner_image.__file__).resolve().parents[2]


def modal_image(sdk: ModuleType, recipe: Recipe) -> Any:
    """The Modal image for ``recipe`` (lazy: nothing is built until ``build``)."""
    plan = install_plan(recipe)
    image = sdk.Image.from_registry(recipe.base_image)
    if plan.apt_sources:
        image = image.run_commands(
            f"echo {shlex.quote(plan.apt_sources)} > {runner_image.APT_SOURCES_FILE}"
        )
    if plan.apt:
        image = image.apt_install(*plan.apt)
    image = image.uv_pip_install(*runner_image.RUNNER_REQUIREMENTS)
    for step in plan.python_by_index:
        image = image.uv_pip_install(*step.packages, index_url=step.index_url)
    if plan.npm:
        registry = f"--registry {shlex.quote(plan.npm_registry)} " if plan.npm_registry else ""
        packages = " ".join(shlex.quote(p) for p in plan.npm)
        image = image.run_commands(f"npm install -g {registry}{packages}")
    image = image.env(
        {**SINGLE_THREADED_ENV, "PYTHONPATH": runner_image.PACKAGE_ROOT, "MPLCONFIGDIR": "/tmp"}
    )
    image = image.add_local_file(
        _PACKAGE_DIR / "__init__.py",
        f"{runner_image.PACKAGE_ROOT}/analyst_env/__init__.py",
        copy=True,
    )
    return image.add_local_dir(
        _PACKAGE_DIR / "envs",
        f"{runner_image.PACKAGE_ROOT}/analyst_env/envs",
        copy=True,
        ignore=["**/__pycache__/**"],
    )


class ModalSandboxBackend(RunnerBackend):
    """Episodes in Modal Sandboxes, one warm runner per slot.

    Args:
        resolve: Maps an image name to its recipe.
        token_id, token_secret: Modal credentials (``MODAL_TOKEN_ID``/``MODAL_TOKEN_SECRET``).
        app_name: The Modal app the sandboxes and images belong to (created if missing).
        runtime: ``None`` (Modal's default gVisor) or ``"vm"``.
        sdk: The ``modal`` module or a fake with the same API.
        sizing: ``cpus`` and ``memory_mb`` when a recipe sets none (the limit half of
            Modal's (request, limit) pairs; the request is a quarter of it).
        timeouts: ``connect_s`` bounds each control-plane call at start-up and each image
            lookup, ``boot_s`` a new slot's runner to be ready, ``sandbox_s`` a sandbox's
            lifetime (slots are retired at half of it).
        pool: See ``RunnerBackend``.

    Raises:
        BackendUnavailable: SDK missing, credentials missing, or Modal unreachable in time.
    """

    name = "modal"

    def __init__(
        self,
        resolve: Callable[[str], Recipe],
        *,
        token_id: str | None,
        token_secret: str | None,
        app_name: str = "analyst-env",
        runtime: str | None = None,
        sdk: ModuleType | None = None,
        sizing: Sizing | None = None,
        timeouts: Timeouts | None = None,
        pool: WarmPool | None = None,
    ) -> None:
        if not token_id or not token_secret:
            raise BackendUnavailable(
                "the modal backend needs credentials: set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET "
                "(create a token with `modal token new`)"
            )
        self.sdk = sdk if sdk is not None else import_sdk("modal", "modal")
        self.sizing, self.timeouts = sizing or self.sizing, timeouts or self.timeouts
        self.runtime = runtime
        self._client = call_within(
            self.timeouts.connect_s,
            "Modal (client)",
            lambda: self.sdk.Client.from_credentials(token_id, token_secret),
        )
        self._app = call_within(
            self.timeouts.connect_s,
            "Modal (app lookup)",
            lambda: self.sdk.App.lookup(app_name, create_if_missing=True, client=self._client),
        )
        self._images: dict[str, Any] = {}
        super().__init__(resolve, pool=pool)

    def _prepare_image(self, image: str, recipe: Recipe, log: BuildLog) -> None:
        name = self.artifact_name(recipe)
        found = self.sdk.Image.from_name(name, client=self._client)
        try:
            call_within(
                self.timeouts.connect_s,
                "Modal (image lookup)",
                lambda: found.hydrate(client=self._client),
            )
        except self.sdk.exception.NotFoundError:
            # Built on Modal's builders (minutes for a big recipe), then published by hash.
            built = modal_image(self.sdk, recipe).build(self._app)
            built.publish(name, client=self._client)
            found = self.sdk.Image.from_name(name, client=self._client)
            call_within(
                self.timeouts.connect_s,
                "Modal (image lookup)",
                lambda: found.hydrate(client=self._client),
            )
        self._images[image] = found

    def _create_slot(self, image: str, recipe: Recipe) -> Slot:
        cpus = recipe.cpus or self.sizing.cpus
        memory = recipe.memory_mb or self.sizing.memory_mb
        sandbox = self.sdk.Sandbox.create(
            "sleep",
            "infinity",
            app=self._app,
            image=self._images[image],
            cpu=(max(cpus / 4, 0.125), cpus),
            memory=(max(memory // 4, 128), memory),
            block_network=True,
            timeout=self.timeouts.sandbox_s,
            runtime=self.runtime,
            client=self._client,
        )
        created = time.monotonic()
        try:
            process = sandbox.exec(
                *runner_image.runner_command(recipe), text=False, env=dict(SINGLE_THREADED_ENV)
            )
            tail = StderrTail()
            tail.drain(iter(process.stderr))

            def write(data: bytes) -> None:
                process.stdin.write(data)
                process.stdin.drain()

            channel = QueueChannel(iter(process.stdout), write, process.stdin.write_eof, tail.text)
            client = RunnerClient(channel, f"modal sandbox {sandbox.object_id}")
            client.wait_ready(self.timeouts.boot_s)
        except BaseException:
            sandbox.terminate()
            raise
        return Slot(
            client, lambda: sandbox.terminate(), meta={"created": created, "sandbox": sandbox}
        )

    def _slot_usable(self, slot: Slot) -> bool:
        # Retire a sandbox well before Modal's timeout ends it under an episode.
        return before_half_life(slot, self.timeouts.sandbox_s)


def from_settings(settings: BackendSettings) -> ModalSandboxBackend:
    """The backend ``make_backend`` builds: Modal credentials from ``MODAL_TOKEN_ID`` and
    ``MODAL_TOKEN_SECRET``."""
    sizing, timeouts, pool = options_from_settings(settings, ModalSandboxBackend)
    return ModalSandboxBackend(
        artifacts.settings_resolver(settings, "modal"),
        token_id=os.environ.get("MODAL_TOKEN_ID"),
        token_secret=os.environ.get("MODAL_TOKEN_SECRET"),
        app_name=settings.modal_app,
        sizing=sizing,
        timeouts=timeouts,
        pool=pool,
    )
