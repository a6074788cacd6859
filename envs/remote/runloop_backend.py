"""The Runloop backend: one Runloop devbox (a micro-VM) per slot, running the slot runner.

Per image (recipe and sizing) a Runloop *blueprint* is built once from the
recipe's Dockerfile (``dockerfile.dockerfile(recipe, runner_baked=False)``) and
named ``analyst-env-<hash>-r<rev>``; later servers find it by name. Blueprint
states map onto the baked-image lifecycle: ``queued``/``provisioning``/
``building`` are building, ``build_complete`` is ready, ``failed`` is refused
with Runloop's ``failure_reason``. Each new slot receives the runner's code as
one archive (``relayed_runner``), as on Daytona.

Per slot a devbox is created from the blueprint under a deny-all network policy
made at start-up, and the runner is started as an asynchronous execution with
stdin attached, behind ``line_relay`` because Runloop's streams carry text
(``runloop_link``). Episodes are forked inside it like on Docker and Daytona.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from analyst_env.envs.recipes.recipe import Recipe
from analyst_env.envs.remote import artifacts, runner_image
from analyst_env.envs.remote.bounded import (
    first_call,
    import_sdk,
    require_api_key,
)
from analyst_env.envs.remote.channel import QueueChannel
from analyst_env.envs.remote.dockerfile import dockerfile
from analyst_env.envs.remote.options import Sizing, Timeouts, WarmPool, options_from_settings
from analyst_env.envs.remote.relayed_runner import SlotCalls, runner_bundle, start_relayed_runner
from analyst_env.envs.remote.runloop_link import execution_channel
from analyst_env.envs.remote.slots import BuildLog, RunnerBackend, Slot
from analyst_env.envs.remote.vendor_builds import furthest_build, wait_while_building
from analyst_env.envs.sandbox import SandboxError

if TYPE_CHECKING:
    from analyst_env.envs.backends import BackendSettings

_BUILDING = ("queued", "provisioning", "building", "awaiting_upload")
#: The network policy every devbox gets: nothing allowed out.
DENY_ALL_POLICY = "analyst-env-deny-all"


def _building(blueprint: Any) -> bool:
    return blueprint.status in _BUILDING


def custom_size(cpus: float, memory_mb: int) -> dict[str, Any]:
    """Runloop's ``CUSTOM_SIZE`` launch parameters nearest above the request.

    Runloop accepts 0.5, 1 or an even number of cores (at most 16) and 1 or an even
    number of GiB (at most 64), with between 2 and 8 GiB per core.
    """
    cores = 0.5 if cpus <= 0.5 else 1.0 if cpus <= 1 else float(min(16, 2 * math.ceil(cpus / 2)))
    gib = max(1, math.ceil(memory_mb / 1024))
    gib = gib if gib == 1 else 2 * math.ceil(gib / 2)
    gib = int(min(64, max(gib, math.ceil(2 * cores)), 8 * cores))
    return {
        "resource_size_request": "CUSTOM_SIZE",
        "custom_cpu_cores": cores,
        "custom_gb_memory": gib,
    }


class RunloopSandboxBackend(RunnerBackend):
    """Episodes in Runloop devboxes, one warm runner per slot.

    Args:
        resolve: Maps an image name to its recipe.
        api_key: ``RUNLOOP_API_KEY``.
        base_url: ``RUNLOOP_BASE_URL`` (Runloop's cloud when None).
        sizing: ``cpus`` and ``memory_mb`` when a recipe sets none (rounded up to a size
            Runloop accepts).
        timeouts: ``connect_s`` bounds the control-plane call at start-up, ``boot_s`` a new
            devbox and its runner to be ready, ``build_s`` a blueprint's build.
        pool: See ``RunnerBackend``.

    Raises:
        BackendUnavailable: Credentials or SDK missing, or Runloop unreachable in time.
    """

    name = "runloop"

    def __init__(
        self,
        resolve: Callable[[str], Recipe],
        *,
        api_key: str | None,
        base_url: str | None = None,
        sizing: Sizing | None = None,
        timeouts: Timeouts | None = None,
        pool: WarmPool | None = None,
    ) -> None:
        api_key = require_api_key(
            api_key, "runloop", "RUNLOOP_API_KEY", "RUNLOOP_BASE_URL", "Runloop"
        )
        self.sdk = import_sdk("runloop_api_client", "runloop")
        self.sizing, self.timeouts = sizing or self.sizing, timeouts or self.timeouts
        where = base_url or "Runloop's cloud"
        self._client = self.sdk.Runloop(bearer_token=api_key, base_url=base_url)
        # the first authenticated call also finds the deny-all policy every devbox uses
        self._policy_id = first_call(
            self.timeouts.connect_s,
            "Runloop",
            where,
            self._deny_all_policy,
            refused=self.sdk.RunloopError,
        )
        self._blueprints: dict[str, str] = {}
        self._bundle = runner_bundle()
        super().__init__(resolve, pool=pool)

    def _deny_all_policy(self) -> str:
        for policy in self._client.network_policies.list(name=DENY_ALL_POLICY):
            return str(policy.id)
        created = self._client.network_policies.create(
            name=DENY_ALL_POLICY,
            allow_all=False,
            allowed_hostnames=[],
            allow_devbox_to_devbox=False,
        )
        return str(created.id)

    def _launch_size(self, recipe: Recipe) -> dict[str, Any]:
        return custom_size(
            recipe.cpus or self.sizing.cpus, recipe.memory_mb or self.sizing.memory_mb
        )

    def artifact_name(self, recipe: Recipe) -> str:
        """``analyst-env-<hash with sizing>-r<rev>``: one blueprint per (recipe, sizing)."""
        sized = recipe.model_copy(
            update={
                "cpus": recipe.cpus or self.sizing.cpus,
                "memory_mb": recipe.memory_mb or self.sizing.memory_mb,
            }
        )
        return "analyst-env-" + runner_image.artifact_tag(sized, include_sizing=True).replace(
            ".", "-"
        )

    def _lookup(self, name: str) -> Any | None:
        try:
            found = [bp for bp in self._client.blueprints.list(name=name) if bp.name == name]
        except self.sdk.RunloopError as exc:
            raise SandboxError(f"Runloop could not look up blueprint {name}: {exc}") from exc
        return furthest_build(
            found, ready=lambda bp: bp.status == "build_complete", building=_building
        )

    def _prepare_image(self, image: str, recipe: Recipe, log: BuildLog) -> None:
        name = self.artifact_name(recipe)
        blueprint = self._lookup(name)
        if blueprint is None:
            try:
                blueprint = self._client.blueprints.create(
                    name=name,
                    dockerfile=dockerfile(recipe, runner_baked=False),
                    launch_parameters=self._launch_size(recipe),
                    network_policy_id=self._policy_id,
                )
            except self.sdk.RunloopError as exc:
                raise SandboxError(f"Runloop could not build blueprint {name}: {exc}") from exc
        blueprint_id = blueprint.id
        blueprint = wait_while_building(
            blueprint,
            lambda: self._client.blueprints.retrieve(blueprint_id),
            _building,
            self.timeouts.build_s,
        )
        if blueprint.status == "failed":
            raise SandboxError(
                f"Runloop blueprint {name} failed to build ({blueprint.failure_reason}); "
                f"delete blueprint {blueprint.id} to build it again"
            )
        if blueprint.status != "build_complete":
            raise SandboxError(f"Runloop blueprint {name} is {blueprint.status}, not ready")
        self._blueprints[image] = str(blueprint.id)

    def _create_slot(self, image: str, recipe: Recipe) -> Slot:
        launch = {**self._launch_size(recipe), "network_policy_id": self._policy_id}
        try:
            devbox = self._client.devboxes.create_and_await_running(
                blueprint_id=self._blueprints[image],
                launch_parameters=launch,
                metadata={"app": "analyst-env", "image": image},
            )
        except self.sdk.RunloopError as exc:
            raise SandboxError(f"Runloop could not create a devbox: {exc}") from exc
        devboxes = self._client.devboxes

        def shutdown() -> None:
            devboxes.shutdown(devbox.id)

        def upload(data: bytes, path: str) -> None:
            devboxes.upload_file(devbox.id, path=path, file=("runner.tar.gz", data))

        def run(command: str) -> tuple[int, str]:
            done = devboxes.execute_and_await_completion(
                devbox.id, command=command, optimistic_timeout=25
            )
            return done.exit_status, done.stderr or ""

        def relay(command: str) -> QueueChannel:
            started = devboxes.execute_async(devbox.id, command=command, attach_stdin=True)
            return execution_channel(self._client, devbox.id, started.execution_id)

        calls = SlotCalls(
            f"Runloop devbox {devbox.id}", upload, run, relay, shutdown, self.sdk.RunloopError
        )
        client = start_relayed_runner(calls, recipe, self._bundle, self.timeouts.boot_s)
        return Slot(client, shutdown, meta={"devbox": devbox})


def from_settings(settings: BackendSettings) -> RunloopSandboxBackend:
    """The backend ``make_backend`` builds: ``RUNLOOP_API_KEY`` and ``RUNLOOP_BASE_URL``,
    as the Runloop SDK reads them."""
    sizing, timeouts, pool = options_from_settings(settings, RunloopSandboxBackend)
    return RunloopSandboxBackend(
        artifacts.settings_resolver(settings, "runloop"),
        api_key=os.environ.get("RUNLOOP_API_KEY") or None,
        base_url=os.environ.get("RUNLOOP_BASE_URL") or None,
        sizing=sizing,
        timeouts=timeouts,
        pool=pool,
    )
