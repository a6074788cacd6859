"""The CoreWeave Sandbox backend: one CoreWeave sandbox (Kata container) per slot, running the
slot runner.

The ``cwsandbox`` SDK speaks gRPC, so it runs only in a helper process
(``coreweave_agent``, reached through ``coreweave_link``): ``grpcio``'s threads never live in
the server, whose forked scoring children would inherit their locks held.

Per slot a sandbox is created from an image reference with egress and ingress denied, sized
by ``ResourceOptions`` limits and ended by CoreWeave after ``max_lifetime_seconds``; it receives
the runner's code as one archive (``relayed_runner``, as on Daytona and Prime) and runs the
runner behind ``line_relay`` through ``exec(stdin=True)`` (the SDK gives stdout as text).

Images: CoreWeave builds none (the SDK has no Dockerfile build), so a sandbox runs an image
reference a registry serves. The ``default`` image runs ``image`` (an image holding Python
and ``runner_image.RUNNER_REQUIREMENTS``). A recipe of its own needs ``image_repository``:
its runner image is then built on the Docker engine the server reaches (``engine_image``, as
the Docker backend builds it, without the runner's code, which each slot receives) and pushed
as ``<repository>:<artifact tag>``, the reference its sandboxes run; without one it is refused.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from analyst_env.envs.recipes.recipe import Recipe
from analyst_env.envs.remote import artifacts, runner_image
from analyst_env.envs.remote.bounded import (
    BackendUnavailable,
    first_call,
    import_sdk,
    require_api_key,
    require_sdk,
)
from analyst_env.envs.remote.channel import QueueChannel
from analyst_env.envs.remote.coreweave_link import (
    AgentError,
    AgentRefused,
    CoreWeaveAgent,
    agent_environment,
)
from analyst_env.envs.remote.engine_image import connect_engine, ensure_image, push_image
from analyst_env.envs.remote.options import Sizing, Timeouts, WarmPool, options_from_settings
from analyst_env.envs.remote.relayed_runner import SlotCalls, runner_bundle, start_relayed_runner
from analyst_env.envs.remote.slots import BuildLog, RunnerBackend, Slot, before_half_life
from analyst_env.envs.sandbox import SandboxError

if TYPE_CHECKING:
    from analyst_env.envs.backends import BackendSettings

#: What a shell command run to completion in a slot (unpacking the runner) may take.
RUN_TIMEOUT_S = 90.0


class CoreWeaveSandboxBackend(RunnerBackend):
    """Episodes in CoreWeave sandboxes, one warm runner per slot.

    Args:
        resolve: Maps an image name to its recipe.
        api_key: ``CWSANDBOX_API_KEY``.
        base_url: ``CWSANDBOX_BASE_URL`` (CoreWeave's API when None; an ``http://`` URL is
            reached without TLS, as the SDK does).
        image: The image reference ``default`` episodes run (``ANALYST_ENV_COREWEAVE_IMAGE``):
            Python 3.10+ with ``RUNNER_REQUIREMENTS``, in a registry CoreWeave pulls from.
        image_repository: Where recipe images are pushed
            (``ANALYST_ENV_COREWEAVE_IMAGE_REPOSITORY``, ``<registry>/<path>``, a registry
            CoreWeave pulls from); ``None``: recipes of their own are refused. Also builds
            ``default`` when ``image`` is None.
        docker_host: The Docker engine that builds and pushes recipe images (``DOCKER_HOST``;
            the SDK's default socket when None); used only with ``image_repository``.
        build_network: Network for those builds' ``RUN`` steps (e.g. ``"host"``).
        sizing: ``cpus`` and ``memory_mb`` when a recipe sets none, as the sandbox's limits;
            ``disk_mb`` is ignored (CoreWeave sizes the disk).
        timeouts: ``connect_s`` bounds the first authenticated call, ``boot_s`` a sandbox and
            its runner to be ready, ``sandbox_s`` a sandbox's lifetime
            (``max_lifetime_seconds``; slots go at half of it); ``build_s`` is unused.
        pool: See ``RunnerBackend``.

    Raises:
        BackendUnavailable: Credentials or SDK missing, CoreWeave refused or silent, or
            ``image_repository`` set and no Docker engine answers.
    """

    name = "coreweave"

    def __init__(
        self,
        resolve: Callable[[str], Recipe],
        *,
        api_key: str | None,
        base_url: str | None = None,
        image: str | None = None,
        image_repository: str | None = None,
        docker_host: str | None = None,
        build_network: str | None = None,
        sizing: Sizing | None = None,
        timeouts: Timeouts | None = None,
        pool: WarmPool | None = None,
    ) -> None:
        api_key = require_api_key(
            api_key, "coreweave", "CWSANDBOX_API_KEY", "CWSANDBOX_BASE_URL", "CoreWeave"
        )
        require_sdk("cwsandbox", "coreweave")
        self.sizing, self.timeouts = sizing or self.sizing, timeouts or self.timeouts
        self.image, self.image_repository = image, image_repository
        self.build_network = build_network
        self._docker: Any = None
        if image_repository:
            self._docker_sdk = import_sdk("docker", "docker")
            self._docker = _recipe_image_engine(
                self._docker_sdk, docker_host, self.timeouts.connect_s
            )
        self._images: dict[str, str] = {}
        self._agent = CoreWeaveAgent(agent_environment(api_key, base_url))
        where = base_url or "CoreWeave's API"
        try:
            connect_s = self.timeouts.connect_s
            first_call(
                connect_s + 10.0,  # the agent's interpreter and the SDK import first
                "CoreWeave",
                where,
                lambda: self._agent.call("count", connect_s),
                refused=AgentRefused,
            )
        except BaseException:
            self._agent.close()
            if self._docker is not None:
                self._docker.close()
            raise
        self._bundle = runner_bundle()
        super().__init__(resolve, pool=pool)

    def _prepare_image(self, image: str, recipe: Recipe, log: BuildLog) -> None:
        default = recipe.content_hash() == runner_image.default_recipe().content_hash()
        if default and self.image:
            log(f"coreweave: default episodes run {self.image}")
            self._images[image] = self.image
            return
        if not self.image_repository:
            raise SandboxError(
                "the coreweave backend needs an image to run: set ANALYST_ENV_COREWEAVE_IMAGE "
                "to an image reference with Python and the runner's packages "
                "(docs/backend-coreweave.md)"
                if default
                else f"the coreweave backend runs only the default image: CoreWeave builds no "
                f"images, and recipe {recipe.name!r} needs its runner image built and pushed: "
                f"set ANALYST_ENV_COREWEAVE_IMAGE_REPOSITORY to a registry the cluster pulls "
                f"from (docs/backend-coreweave.md)"
            )
        reference = self.artifact_name(recipe)
        log(f"coreweave: building {reference} on the Docker engine")
        ensure_image(
            self._docker,
            self._docker_sdk,
            recipe,
            reference,
            build_network=self.build_network,
            runner_baked=False,  # each slot receives the runner's code (relayed_runner)
        )
        log(f"coreweave: pushing {reference}")
        push_image(self._docker, self._docker_sdk, reference)
        self._images[image] = reference

    def artifact_name(self, recipe: Recipe) -> str:
        """The image reference sandboxes of ``recipe`` run: ``<repository>:<artifact tag>``
        with a repository, else ``analyst-env:<artifact tag>`` (the image it would need)."""
        if self.image_repository:
            return f"{self.image_repository}:{runner_image.artifact_tag(recipe)}"
        return runner_image.image_reference(recipe)

    def _create_slot(self, image: str, recipe: Recipe) -> Slot:
        agent, boot_s = self._agent, self.timeouts.boot_s
        memory_mb = recipe.memory_mb or self.sizing.memory_mb
        try:
            sandbox = agent.call(
                "create",
                boot_s,
                image=self._images[image],
                cpus=f"{recipe.cpus or self.sizing.cpus:g}",
                memory=f"{max(1, math.ceil(memory_mb))}Mi",
                lifetime_s=float(self.timeouts.sandbox_s),
            )
        except (AgentError, TimeoutError) as exc:
            raise SandboxError(f"CoreWeave could not create a sandbox: {exc}") from exc
        created = time.monotonic()

        def delete() -> None:
            if not agent.closed:  # else the agent stopped it when its input ended
                agent.call("delete", self.timeouts.connect_s, sandbox=sandbox)

        def upload(data: bytes, path: str) -> None:
            agent.write_file(sandbox, path, data, boot_s)

        def run(command: str) -> tuple[int, str]:
            code, output = agent.call("run", RUN_TIMEOUT_S, sandbox=sandbox, command=command)
            return code, output

        def relay(command: str) -> QueueChannel:
            return agent.open_channel(sandbox, command)

        errors = (AgentError, TimeoutError)
        calls = SlotCalls(f"CoreWeave sandbox {sandbox}", upload, run, relay, delete, errors)
        runner = start_relayed_runner(calls, recipe, self._bundle, boot_s)
        return Slot(runner, delete, meta={"created": created, "sandbox": sandbox})

    def _slot_usable(self, slot: Slot) -> bool:
        # Replace a sandbox well before max_lifetime_seconds ends it under an episode.
        return before_half_life(slot, self.timeouts.sandbox_s)

    def close(self) -> None:
        super().close()
        self._agent.close()
        if self._docker is not None:
            self._docker.close()


def _recipe_image_engine(sdk: Any, docker_host: str | None, connect_s: float) -> Any:
    """The Docker engine that builds and pushes recipe images, answering, or a one-line
    refusal naming ``DOCKER_HOST``.

    Raises:
        BackendUnavailable: No engine answered.
    """
    try:
        return connect_engine(sdk, docker_host, connect_s)
    except Exception as exc:
        where = docker_host or "the default socket"
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise BackendUnavailable(
            f"the coreweave backend builds recipe images (ANALYST_ENV_COREWEAVE_IMAGE_REPOSITORY "
            f"is set) on a Docker engine and none answers at {where} ({detail}): set "
            f"DOCKER_HOST to an engine that answers"
        ) from None


def from_settings(settings: BackendSettings) -> CoreWeaveSandboxBackend:
    """The backend ``make_backend`` builds: ``CWSANDBOX_API_KEY`` and ``CWSANDBOX_BASE_URL``, as
    the SDK reads them, the image of ``ANALYST_ENV_COREWEAVE_IMAGE``, and recipe images pushed
    to ``ANALYST_ENV_COREWEAVE_IMAGE_REPOSITORY``, built on the engine of ``DOCKER_HOST``."""
    sizing, timeouts, pool = options_from_settings(settings, CoreWeaveSandboxBackend)
    return CoreWeaveSandboxBackend(
        artifacts.settings_resolver(settings, "coreweave"),
        api_key=os.environ.get("CWSANDBOX_API_KEY") or None,
        base_url=os.environ.get("CWSANDBOX_BASE_URL") or None,
        image=settings.coreweave_image,
        image_repository=settings.coreweave_image_repository,
        docker_host=os.environ.get("DOCKER_HOST") or None,
        sizing=sizing,
        timeouts=timeouts,
        pool=pool,
    )
