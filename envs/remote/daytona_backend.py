"""The Daytona backend: one Daytona sandbox per slot, running the slot runner.

Per image (recipe and sizing) a Daytona *snapshot* is built once from the
recipe's Dockerfile (``dockerfile.dockerfile(recipe, runner_baked=False)``) and
named ``analyst-env-<hash>-r<rev>``; later servers find it by name. Daytona
builds a snapshot from Dockerfile text plus a build context uploaded to its
object storage; this backend sends no context, so the snapshot holds the
recipe's packages and the runner's requirements, and each new slot receives
the runner's code (``runner_image.runner_sources``) as one archive. Sizing is
fixed when Daytona builds a snapshot, as on E2B.

Per slot a sandbox is created from the snapshot with all network blocked, and
the runner is started as an asynchronous command in a session, behind
``line_relay`` because Daytona's session streams carry text lines
(``daytona_link``). Episodes are forked inside it like on Docker and Modal.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analyst_env.envs.recipes.recipe import Recipe
from analyst_env.envs.remote import artifacts, runner_image
from analyst_env.envs.remote.bounded import (
    BackendUnavailable,
    call_within,
    first_call,
    import_sdk,
)
from analyst_env.envs.remote.channel import QueueChannel
from analyst_env.envs.remote.daytona_link import session_channel
from analyst_env.envs.remote.dockerfile import dockerfile
from analyst_env.envs.remote.options import Sizing, Timeouts, WarmPool, options_from_settings
from analyst_env.envs.remote.relayed_runner import SlotCalls, runner_bundle, start_relayed_runner
from analyst_env.envs.remote.slots import BuildLog, RunnerBackend, Slot, before_half_life
from analyst_env.envs.remote.vendor_builds import wait_while_building
from analyst_env.envs.sandbox import SandboxError

if TYPE_CHECKING:
    from analyst_env.envs.backends import BackendSettings

#: The session that runs the relayed runner in each sandbox.
RUNNER_SESSION = "analyst-env-runner"
_BUILDING = ("pending", "building", "pulling", "snapshotting")
_FAILED = ("error", "build_failed")


def _state(snapshot: Any) -> str:
    return str(getattr(snapshot.state, "value", snapshot.state))


class DaytonaSandboxBackend(RunnerBackend):
    """Episodes in Daytona sandboxes, one warm runner per slot.

    Args:
        resolve: Maps an image name to its recipe.
        api_key: ``DAYTONA_API_KEY``; or ``jwt_token`` with ``organization_id``.
        api_url: ``DAYTONA_API_URL`` (Daytona's cloud when None).
        target: ``DAYTONA_TARGET``, the region (the organisation's default when None).
        auto_stop_minutes: Daytona stops (and, the sandboxes being ephemeral, deletes) a
            sandbox idle this long, so a server that dies leaves nothing running; idle
            slots are replaced at half of it.
        sizing: Sizing when a recipe sets none (baked into its snapshot; Daytona counts
            whole vCPUs and GiB). The disk holds the image as well, so it is at least 3 GiB
            (Daytona's default, used when no disk size is set).
        timeouts: ``connect_s`` bounds each control-plane call at start-up and each snapshot
            lookup, ``boot_s`` a new sandbox and its runner to be ready, ``build_s`` a
            snapshot's build.
        pool: See ``RunnerBackend``.

    Raises:
        BackendUnavailable: Credentials or SDK missing, or Daytona unreachable in time.
    """

    name = "daytona"

    def __init__(
        self,
        resolve: Callable[[str], Recipe],
        *,
        api_key: str | None,
        jwt_token: str | None = None,
        organization_id: str | None = None,
        api_url: str | None = None,
        target: str | None = None,
        auto_stop_minutes: int = 60,
        sizing: Sizing | None = None,
        timeouts: Timeouts | None = None,
        pool: WarmPool | None = None,
    ) -> None:
        if not api_key and not (jwt_token and organization_id):
            raise BackendUnavailable(
                "the daytona backend needs credentials: set DAYTONA_API_KEY (or DAYTONA_JWT_TOKEN "
                "and DAYTONA_ORGANIZATION_ID), and DAYTONA_API_URL for a self-hosted Daytona"
            )
        self.sdk = import_sdk("daytona", "daytona")
        self.sizing, self.timeouts = sizing or self.sizing, timeouts or self.timeouts
        self.auto_stop_minutes = auto_stop_minutes
        config = self.sdk.DaytonaConfig(
            api_key=api_key,
            jwt_token=jwt_token,
            organization_id=organization_id,
            api_url=api_url,
            target=target,
        )
        where = api_url or "Daytona's cloud"
        self._client = call_within(
            self.timeouts.connect_s,
            f"Daytona (client for {where})",
            lambda: self.sdk.Daytona(config),
        )
        first_call(
            self.timeouts.connect_s,
            "Daytona",
            where,
            lambda: self._client.snapshot.list(page=1, limit=1),
            refused=self.sdk.DaytonaError,
        )
        self._snapshots: dict[str, str] = {}
        self._bundle = runner_bundle()
        super().__init__(resolve, pool=pool)

    def _sized(self, recipe: Recipe) -> Recipe:
        return recipe.model_copy(
            update={
                "cpus": recipe.cpus or self.sizing.cpus,
                "memory_mb": recipe.memory_mb or self.sizing.memory_mb,
                "disk_mb": recipe.disk_mb or self.sizing.disk_mb,
            }
        )

    def artifact_name(self, recipe: Recipe) -> str:
        """``analyst-env-<hash with sizing>-r<rev>``: one snapshot per (recipe, sizing)."""
        tag = runner_image.artifact_tag(self._sized(recipe), include_sizing=True)
        return f"analyst-env-{tag}".replace(".", "-")

    def _resources(self, recipe: Recipe) -> Any:
        sized = self._sized(recipe)
        assert sized.cpus is not None and sized.memory_mb is not None  # filled by _sized
        # The disk holds the image too: never below Daytona's default of 3 GiB.
        disk = max(3, math.ceil(sized.disk_mb / 1024)) if sized.disk_mb else None
        memory = max(1, math.ceil(sized.memory_mb / 1024))
        return self.sdk.Resources(cpu=max(1, round(sized.cpus)), memory=memory, disk=disk)

    def _lookup(self, name: str) -> Any | None:
        try:
            return call_within(
                self.timeouts.connect_s,
                "Daytona (snapshot lookup)",
                lambda: self._client.snapshot.get(name),
            )
        except self.sdk.DaytonaNotFoundError:
            return None
        except self.sdk.DaytonaError as exc:
            raise SandboxError(f"Daytona could not look up snapshot {name}: {exc}") from exc

    def _build(self, recipe: Recipe, name: str, log: BuildLog) -> Any:
        """Have Daytona build ``name`` from the recipe's Dockerfile (minutes for a big recipe)."""
        with tempfile.TemporaryDirectory(prefix="analyst-env-daytona-") as folder:
            path = Path(folder) / "Dockerfile"
            path.write_text(dockerfile(recipe, runner_baked=False))
            image = self.sdk.Image.from_dockerfile(path)
        params = self.sdk.CreateSnapshotParams(
            name=name, image=image, resources=self._resources(recipe)
        )
        try:
            return self._client.snapshot.create(params, on_logs=log, timeout=self.timeouts.build_s)
        except self.sdk.DaytonaError as exc:
            failed = self._lookup(name)  # a failed build keeps its state and reason
            if failed is None:
                raise SandboxError(f"Daytona could not build snapshot {name}: {exc}") from exc
            return failed

    def _prepare_image(self, image: str, recipe: Recipe, log: BuildLog) -> None:
        name = self.artifact_name(recipe)
        snapshot = self._lookup(name) or self._build(recipe, name, log)
        if _state(snapshot) == "inactive":  # Daytona deactivates snapshots left unused
            try:
                snapshot = call_within(
                    self.timeouts.connect_s,
                    "Daytona (snapshot activation)",
                    lambda: self._client.snapshot.activate(snapshot),
                )
            except self.sdk.DaytonaError as exc:
                raise SandboxError(f"Daytona could not activate snapshot {name}: {exc}") from exc
        snapshot = wait_while_building(  # another server is building it
            snapshot,
            lambda: self._lookup(name) or self._build(recipe, name, log),
            lambda snapshot: _state(snapshot) in _BUILDING,
            self.timeouts.build_s,
        )
        state = _state(snapshot)
        if state in _FAILED:
            raise SandboxError(
                f"Daytona snapshot {name} failed to build ({state}): {snapshot.error_reason}; "
                f"delete it (`daytona snapshot delete {name}`) to build it again"
            )
        if state != "active":
            raise SandboxError(f"Daytona snapshot {name} is {state}, not active")
        self._snapshots[image] = name

    def _create_slot(self, image: str, recipe: Recipe) -> Slot:
        params = self.sdk.CreateSandboxFromSnapshotParams(
            snapshot=self._snapshots[image],
            network_block_all=True,
            labels={"app": "analyst-env", "image": image},
            auto_stop_interval=self.auto_stop_minutes,
            ephemeral=True,
        )
        try:
            sandbox = self._client.create(params, timeout=self.timeouts.boot_s)
        except self.sdk.DaytonaError as exc:
            raise SandboxError(f"Daytona could not create a sandbox: {exc}") from exc
        created = time.monotonic()
        process = sandbox.process

        def run(command: str) -> tuple[int, str]:
            done = process.exec(command, timeout=120)
            return done.exit_code, done.result

        def relay(command: str) -> QueueChannel:
            process.create_session(RUNNER_SESSION)
            request = self.sdk.SessionExecuteRequest(
                command=command, run_async=True, suppress_input_echo=True
            )
            started = process.execute_session_command(RUNNER_SESSION, request)
            return session_channel(process, RUNNER_SESSION, started.cmd_id)

        calls = SlotCalls(
            f"Daytona sandbox {sandbox.id}",
            sandbox.fs.upload_file,
            run,
            relay,
            sandbox.delete,
            self.sdk.DaytonaError,
        )
        client = start_relayed_runner(calls, recipe, self._bundle, self.timeouts.boot_s)
        return Slot(client, sandbox.delete, meta={"created": created, "sandbox": sandbox})

    def _slot_usable(self, slot: Slot) -> bool:
        # Replace a sandbox well before Daytona's auto-stop could end it under an episode.
        return before_half_life(slot, self.auto_stop_minutes * 60)


def from_settings(settings: BackendSettings) -> DaytonaSandboxBackend:
    """The backend ``make_backend`` builds: credentials from ``DAYTONA_API_KEY`` (or
    ``DAYTONA_JWT_TOKEN`` and ``DAYTONA_ORGANIZATION_ID``), the endpoint from
    ``DAYTONA_API_URL`` and the region from ``DAYTONA_TARGET``, as the Daytona SDK reads them."""
    sizing, timeouts, pool = options_from_settings(settings, DaytonaSandboxBackend)
    return DaytonaSandboxBackend(
        artifacts.settings_resolver(settings, "daytona"),
        api_key=os.environ.get("DAYTONA_API_KEY") or None,
        jwt_token=os.environ.get("DAYTONA_JWT_TOKEN") or None,
        organization_id=os.environ.get("DAYTONA_ORGANIZATION_ID") or None,
        api_url=os.environ.get("DAYTONA_API_URL") or None,
        target=os.environ.get("DAYTONA_TARGET") or None,
        sizing=sizing,
        timeouts=timeouts,
        pool=pool,
    )
