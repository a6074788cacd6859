"""The Deno Sandbox backend: one Deno sandbox (a Linux microVM) per slot, running the slot runner.

Per image a Deno *snapshot* named ``analyst-env-<hash>-r<rev>`` is built once
(``deno_snapshot``): a volume from ``builtin:debian-13``, a sandbox booted on it that runs the
recipe's install steps, the sandbox ended, ``volumes.snapshot``, the build volume deleted.
Later servers find the snapshot by its slug. Deno keeps no build state, so the lifecycle is
this backend's: building while the steps run (another server's build shows as its volume
existing without a snapshot yet, and is waited for), ready once the snapshot exists, and a
failed build is refused with the failing step and its output, by this server without
building again (a restarted server tries once more).

Per slot a sandbox boots from the snapshot with no outbound host allowed (``allow_net=[]``)
and the recipe's memory; Deno has no CPU limit. The runner's code arrives as one archive
(``relayed_runner``) and the runner reads its requests from a FIFO (``deno_link``: why, and
what it costs). A sandbox lives as long as its WebSocket, and at most ``timeouts.sandbox_s``:
a slot whose remaining lifetime is shorter than one episode's budget is never handed out
again, so an episode always starts on a sandbox that outlives it (never extended part-way
through).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from analyst_env.envs.capabilities import BackendCapabilities
from analyst_env.envs.recipes.recipe import Recipe
from analyst_env.envs.remote import artifacts, runner_image
from analyst_env.envs.remote.bounded import BackendUnavailable, import_sdk
from analyst_env.envs.remote.deno_link import OpenSandbox, fifo_channel
from analyst_env.envs.remote.deno_snapshot import BASE_SNAPSHOT, BuildFailed, bake_steps
from analyst_env.envs.remote.options import Sizing, Timeouts, WarmPool, options_from_settings
from analyst_env.envs.remote.relayed_runner import fifo_command, runner_bundle
from analyst_env.envs.remote.runner_link import RunnerClient
from analyst_env.envs.remote.sdk_loop import SdkLoop
from analyst_env.envs.remote.slots import BuildLog, RunnerBackend, Slot
from analyst_env.envs.remote.vendor_builds import wait_while_building
from analyst_env.envs.sandbox import SandboxError

if TYPE_CHECKING:
    from analyst_env.envs.backends import BackendSettings

#: Where the runner reads its requests inside each sandbox.
REQUESTS_FIFO = f"{runner_image.PACKAGE_ROOT}/requests.fifo"
#: The lifetime assumed for a sandbox: the SDK documents no limit for a "session" sandbox,
#: but one ``extend_timeout`` adds at most 30 minutes, so no longer is relied on.
MAX_LIFETIME_S = 1800


class DenoSandboxBackend(RunnerBackend):
    """Episodes in Deno sandboxes, one warm runner per slot.

    Args:
        resolve: Maps an image name to its recipe.
        token: ``DENO_DEPLOY_TOKEN``. The endpoints are the SDK's own variables
            (``DENO_DEPLOY_ENDPOINT``, ``DENO_SANDBOX_ENDPOINT``).
        region: Where sandboxes and snapshots live (Deno's ``ord`` or ``ams``).
        episode_budget_s: How long one episode may need: a slot is handed out only while it
            has that much of its lifetime (``timeouts.sandbox_s``) left.
        sizing: ``memory_mb`` per sandbox when a recipe sets none, ``disk_mb`` the capacity
            of a build volume (rounded up to whole GiB) when it sets no disk; Deno has no
            CPU limit.
        timeouts: Bounds on a control-plane call (``connect_s``), on a new sandbox and its
            runner (``boot_s``), on one build (``build_s``), and how long a sandbox may live
            (``sandbox_s``, at most ``MAX_LIFETIME_S``).
        pool: See ``RunnerBackend``.

    Raises:
        BackendUnavailable: Token or SDK missing, or Deno unreachable or refusing in time.
        ValueError: A lifetime over ``MAX_LIFETIME_S`` or not above ``episode_budget_s``,
            or ``sizing`` without a ``disk_mb``.
    """

    name = "deno"
    # Memory is per sandbox but Deno has no CPU limit, hence no per-sandbox limits.
    capabilities = BackendCapabilities(
        network="none", per_sandbox_limits=False, warm_pool=True, verify_commands=True
    )
    sizing = Sizing(memory_mb=2048, disk_mb=8 * 1024)
    timeouts = Timeouts(sandbox_s=MAX_LIFETIME_S)

    def __init__(
        self,
        resolve: Callable[[str], Recipe],
        *,
        token: str | None,
        region: str = "ord",
        episode_budget_s: float = 600.0,
        sizing: Sizing | None = None,
        timeouts: Timeouts | None = None,
        pool: WarmPool | None = None,
    ) -> None:
        if not token:
            raise BackendUnavailable(
                "the deno backend needs credentials: set DENO_DEPLOY_TOKEN (and "
                "DENO_DEPLOY_ENDPOINT / DENO_SANDBOX_ENDPOINT for endpoints other than Deno's)"
            )
        self.sizing, self.timeouts = sizing or self.sizing, timeouts or self.timeouts
        if not 0 < episode_budget_s < self.timeouts.sandbox_s <= MAX_LIFETIME_S:
            raise ValueError("need 0 < episode_budget_s < timeouts.sandbox_s <= 1800")
        if self.sizing.disk_mb is None:
            raise ValueError("the deno backend needs sizing.disk_mb, a build volume's capacity")
        self.sdk = import_sdk("deno_sandbox", "deno")
        self.region, self.episode_budget_s = region, episode_budget_s
        self._sdk_loop = SdkLoop("Deno")
        self._deploy = self.sdk.AsyncDenoDeploy({"token": token})
        where = os.environ.get("DENO_DEPLOY_ENDPOINT") or "Deno Deploy"
        try:  # one cheap authenticated call, so a bad token stops the server at start-up
            self._call(self._deploy.snapshots.list(limit=1), f"Deno (API at {where})")
        except self.sdk.HTTPStatusError as exc:
            self._sdk_loop.close()
            raise BackendUnavailable(f"Deno at {where} refused the request: {exc}") from None
        except BackendUnavailable:
            self._sdk_loop.close()
            raise
        self._snapshots: dict[str, str] = {}
        self._failed: dict[str, str] = {}
        self._open: set[OpenSandbox] = set()  # slots' sandboxes, ended at the latest by close
        self._bundle = runner_bundle()
        super().__init__(resolve, pool=pool)

    def _call(self, coro: Any, what: str, timeout_s: float | None = None) -> Any:
        try:
            return self._sdk_loop.run(coro, timeout_s or self.timeouts.connect_s)
        except TimeoutError:
            raise BackendUnavailable(
                f"{what} did not answer within {timeout_s or self.timeouts.connect_s:g} s "
                "(is the service reachable?)"
            ) from None

    def artifact_name(self, recipe: Recipe) -> str:
        """``analyst-env-<hash>-r<rev>``: one snapshot per recipe (memory is set per sandbox)."""
        return "analyst-env-" + runner_image.artifact_tag(recipe).replace(".", "-")

    # ── snapshots ──────────────────────────────────────────────────────────
    def _snapshot(self, name: str) -> Any:
        try:
            return self._call(self._deploy.snapshots.get(name), "Deno (snapshot lookup)")
        except self.sdk.HTTPStatusError as exc:
            raise SandboxError(f"Deno could not look up snapshot {name}: {exc}") from exc

    def _prepare_image(self, image: str, recipe: Recipe, log: BuildLog) -> None:
        name = self.artifact_name(recipe)
        if name in self._failed:
            raise SandboxError(self._failed[name])
        if self._snapshot(name) is None:
            try:
                self._build(recipe, name, log)
            except BuildFailed as exc:  # remembered; a service that did not answer is not
                self._failed[name] = f"{exc}; fix the recipe, or restart the server to retry"
                raise BuildFailed(self._failed[name]) from None
        self._snapshots[image] = name

    def _build(self, recipe: Recipe, name: str, log: BuildLog) -> None:
        steps = bake_steps(recipe)
        volumes, slug = self._deploy.volumes, f"{name}-build"
        disk_mb = recipe.disk_mb or self.sizing.disk_mb
        assert disk_mb is not None  # the constructor refuses a sizing without one
        capacity = f"{math.ceil(disk_mb / 1024)}GiB"
        try:
            volume = self._call(
                volumes.create(slug, self.region, capacity, from_snapshot=BASE_SNAPSHOT),
                "Deno (build volume)",
            )
        except self.sdk.HTTPStatusError as exc:
            if exc.status_code == 409:  # another server is building it: wait for its snapshot
                return self._await_other_build(name)
            raise SandboxError(f"Deno could not create build volume {slug}: {exc}") from exc
        try:
            self._run_steps(name, volume["slug"], steps, log)
            self._snapshot_volume(volume["id"], name)
        except SandboxError:
            raise
        except Exception as exc:  # the SDK's own errors (a refused boot, a dropped socket)
            raise SandboxError(f"Deno could not build snapshot {name}: {exc}") from exc
        finally:
            try:
                self._call(volumes.delete(volume["id"]), "Deno (build volume cleanup)")
            except Exception as exc:
                log(f"deno: could not delete build volume {slug}: {exc}")

    def _run_steps(
        self, name: str, volume: str, steps: list[tuple[str, str]], log: BuildLog
    ) -> None:
        deadline = time.monotonic() + self.timeouts.build_s
        box = OpenSandbox(
            self._sdk_loop,
            self._deploy,
            self.timeouts.boot_s,
            region=self.region,
            root=volume,
            memory_mb=self.sizing.memory_mb,
            labels={"app": "analyst-env", "build": name[:60]},
        )
        try:
            for label, script in steps:
                log(f"deno: {label}: {script}")
                try:
                    code, output = box.run(script, timeout_s=max(1.0, deadline - time.monotonic()))
                except TimeoutError:
                    raise SandboxError(f"Deno snapshot {name} ran out of time at {label}") from None
                for line in output.splitlines()[-40:]:
                    log(line)
                if code != 0:
                    tail = "\n".join(output.strip().splitlines()[-8:])
                    raise BuildFailed(
                        f"Deno snapshot {name} failed to build at step {label!r} "
                        f"(exit {code}): {tail}"
                    )
        finally:
            box.close()  # the volume is detached before it is snapshotted

    def _snapshot_volume(self, volume_id: str, name: str) -> None:
        """Snapshot the build volume once Deno has detached it from the ended sandbox."""
        deadline = time.monotonic() + 120.0
        while True:
            try:
                snapshot = self._deploy.volumes.snapshot(volume_id, slug=name)
                self._call(snapshot, "Deno (snapshot)", 300.0)
                return
            except self.sdk.HTTPStatusError as exc:
                if exc.status_code != 409 or time.monotonic() > deadline:
                    raise SandboxError(f"Deno could not snapshot {name}: {exc}") from exc
                if self._snapshot(name) is not None:  # made meanwhile by another server
                    return
            time.sleep(0.5)  # the volume is still attached

    def _await_other_build(self, name: str) -> None:
        snapshot = wait_while_building(
            self._snapshot(name),
            lambda: self._snapshot(name),
            lambda snapshot: snapshot is None,
            self.timeouts.build_s,
        )
        if snapshot is None:
            raise SandboxError(
                f"Deno snapshot {name} is still building elsewhere, not ready (if no server "
                f"is building it, delete volume {name}-build to build it again)"
            )

    # ── slots ──────────────────────────────────────────────────────────────
    def _create_slot(self, image: str, recipe: Recipe) -> Slot:
        try:
            box = OpenSandbox(
                self._sdk_loop,
                self._deploy,
                self.timeouts.boot_s,
                region=self.region,
                root=self._snapshots[image],
                memory_mb=recipe.memory_mb or self.sizing.memory_mb,
                allow_net=[],
                labels={"app": "analyst-env", "image": image[:60]},
            )
        except TimeoutError:
            raise SandboxError(
                f"Deno did not boot a sandbox in {self.timeouts.boot_s:g} s"
            ) from None
        except Exception as exc:
            raise SandboxError(f"Deno could not create a sandbox: {exc}") from exc
        born = time.monotonic()
        self._open.add(box)
        try:
            code, output = box.run(
                f"mkdir -p {runner_image.WORKDIR} {runner_image.PACKAGE_ROOT} && "
                f"tar -xzf - -C {runner_image.PACKAGE_ROOT}",
                stdin=self._bundle,
                timeout_s=120.0,
            )
            if code != 0:
                raise SandboxError(f"unpacking the runner failed: {output[-500:]}")
            runner = self._sdk_loop.run(
                box.sandbox.spawn(
                    "sh",
                    args=["-c", fifo_command(recipe, REQUESTS_FIFO)],
                    stdout="piped",
                    stderr="piped",
                ),
                self.timeouts.boot_s,
            )
            client = RunnerClient(
                fifo_channel(box, runner, REQUESTS_FIFO), f"deno sandbox {box.id}"
            )
            client.wait_ready(self.timeouts.boot_s)
        except BaseException as exc:
            self._end(box)
            if isinstance(exc, TimeoutError):
                raise SandboxError(f"Deno sandbox {box.id} did not start its runner") from None
            raise
        return Slot(client, lambda: self._end(box), meta={"born": born, "sandbox": box.id})

    def _end(self, box: OpenSandbox) -> None:
        self._open.discard(box)
        box.close()

    def _slot_usable(self, slot: Slot) -> bool:
        """Only a sandbox with a whole episode's budget of lifetime left takes an episode."""
        age = time.monotonic() - slot.meta["born"]
        return age + self.episode_budget_s <= self.timeouts.sandbox_s

    def close(self) -> None:
        """Destroy every slot, and end the sandboxes of slots still being handed back (their
        disposal runs on threads that would find the SDK's loop stopped)."""
        super().close()
        for box in list(self._open):
            self._end(box)
        self._sdk_loop.close()


def from_settings(settings: BackendSettings) -> DenoSandboxBackend:
    """The backend ``make_backend`` builds: ``DENO_DEPLOY_TOKEN``, as the Deno SDK reads it
    (the SDK reads its endpoint variables itself)."""
    sizing, timeouts, pool = options_from_settings(settings, DenoSandboxBackend)
    return DenoSandboxBackend(
        artifacts.settings_resolver(settings, "deno"),
        token=os.environ.get("DENO_DEPLOY_TOKEN") or None,
        sizing=sizing,
        timeouts=timeouts,
        pool=pool,
    )
