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
and ``runner_image.RUNNER_REQUIREMENTS``); a recipe of its own is refused with what to push.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from analyst_env.envs.recipes.recipe import Recipe
from analyst_env.envs.remote import artifacts, runner_image
from analyst_env.envs.remote.bounded import (
    first_call,
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
from analyst_env.envs.remote.options import Sizing, Timeouts, WarmPool, options_from_settings
from analyst_env.envs.remote.relayed_runner import SlotCalls, runner_bundle, start_relayed_runner
from analyst_env.envs.remote.slots import BuildLog, RunnerBackend, Slot
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
        sizing: ``cpus`` and ``memory_mb`` when a recipe sets none, as the sandbox's limits;
            ``disk_mb`` is ignored (CoreWeave sizes the disk).
        timeouts: ``connect_s`` bounds the first authenticated call, ``boot_s`` a sandbox and
            its runner to be ready, ``sandbox_s`` a sandbox's lifetime
            (``max_lifetime_seconds``; slots go at half of it); ``build_s`` is unused.
        pool: See ``RunnerBackend``.

    Raises:
        BackendUnavailable: Credentials or SDK missing, or CoreWeave refused or silent.
    """

    name = "coreweave"

    def __init__(
        self,
        resolve: Callable[[str], Recipe],
        *,
        api_key: str | None,
        base_url: str | None = None,
        image: str | None = None,
        sizing: Sizing | None = None,
        timeouts: Timeouts | None = None,
        pool: WarmPool | None = None,
    ) -> None:
        api_key = require_api_key(
            api_key, "coreweave", "CWSANDBOX_API_KEY", "CWSANDBOX_BASE_URL", "CoreWeave"
        )
        require_sdk("cwsandbox", "coreweave")
        self.sizing, self.timeouts = sizing or self.sizing, timeouts or self.timeouts
        self.image = image
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
            raise
        self._bundle = runner_bundle()
        super().__init__(resolve, pool=pool)

    def _prepare_image(self, image: str, recipe: Recipe, log: BuildLog) -> None:
        default = runner_image.default_recipe().content_hash()
        if recipe.content_hash() != default:
            raise SandboxError(
                f"the coreweave backend runs only the default image: CoreWeave builds no "
                f"images, and recipe {recipe.name!r} would need its runner image "
                f"({self.artifact_name(recipe)}) built and pushed to a registry the cluster "
                f"pulls from (docs/backend-coreweave.md)"
            )
        if not self.image:
            raise SandboxError(
                "the coreweave backend needs an image to run: set ANALYST_ENV_COREWEAVE_IMAGE "
                "to an image reference with Python and the runner's packages "
                "(docs/backend-coreweave.md)"
            )
        log(f"coreweave: default episodes run {self.image}")

    def artifact_name(self, recipe: Recipe) -> str:
        """``analyst-env:<hash>-r<rev>``: the runner image a recipe would need."""
        return runner_image.image_reference(recipe)

    def _create_slot(self, image: str, recipe: Recipe) -> Slot:
        agent, boot_s = self._agent, self.timeouts.boot_s
        memory_mb = recipe.memory_mb or self.sizing.memory_mb
        try:
            sandbox = agent.call(
                "create",
                boot_s,
                image=self.image,
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
        return time.monotonic() - slot.meta["created"] < self.timeouts.sandbox_s * 0.5

    def close(self) -> None:
        super().close()
        self._agent.close()


def from_settings(settings: BackendSettings) -> CoreWeaveSandboxBackend:
    """The backend ``make_backend`` builds: ``CWSANDBOX_API_KEY`` and ``CWSANDBOX_BASE_URL``, as
    the SDK reads them, and the image of ``ANALYST_ENV_COREWEAVE_IMAGE``."""
    sizing, timeouts, pool = options_from_settings(settings, CoreWeaveSandboxBackend)
    return CoreWeaveSandboxBackend(
        artifacts.settings_resolver(settings, "coreweave"),
        api_key=os.environ.get("CWSANDBOX_API_KEY") or None,
        base_url=os.environ.get("CWSANDBOX_BASE_URL") or None,
        image=settings.coreweave_image,
        sizing=sizing,
        timeouts=timeouts,
        pool=pool,
    )
