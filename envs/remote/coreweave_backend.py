"""The CoreWeave backend: one CoreWeave Sandbox per slot, running the slot runner.

CoreWeave runs a container image reference and has no build API, so nothing is baked
here: the operator names one image the cluster can pull (``ANALYST_ENV_COREWEAVE_IMAGE``)
that holds Python, the runner's requirements and the packages of every recipe served
(``analyst-env`` renders a recipe's Dockerfile with ``dockerfile(recipe,
runner_baked=False)``; build and push it yourself). Each new slot receives the runner's
code as one archive (``relayed_runner``), as on Daytona and Runloop, so the image never
goes stale against this server's code.

Per slot a sandbox is created with egress and ingress denied (``NetworkOptions``), the
recipe's cpu and memory as its resources (requests equal to limits: Guaranteed QoS, so
a slot is not squeezed under load), a bounded ``max_lifetime_seconds`` (CoreWeave ends
it even if this server dies) and the ``analyst-env`` tag. The runner is started with
``sandbox.exec([...], stdin=True)`` (``StreamExec``) behind ``line_relay``, because the
SDK delivers stdout as text (``coreweave_link``). Episodes are forked inside it.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from analyst_env.envs.recipes.recipe import Recipe
from analyst_env.envs.remote import artifacts
from analyst_env.envs.remote.bounded import BackendUnavailable, call_within, import_sdk
from analyst_env.envs.remote.channel import QueueChannel
from analyst_env.envs.remote.coreweave_link import exec_channel
from analyst_env.envs.remote.relayed_runner import SlotCalls, runner_bundle, start_relayed_runner
from analyst_env.envs.remote.slots import BuildLog, RunnerBackend, Slot
from analyst_env.envs.sandbox import SandboxError

if TYPE_CHECKING:
    from analyst_env.envs.backends import BackendSettings

#: The tag every sandbox of this backend carries (``cwsandbox list --tag analyst-env``).
TAG = "analyst-env"
DEFAULT_BASE_URL = "https://api.cwsandbox.com"


def resources(cpus: float, memory_mb: int) -> dict[str, dict[str, str]]:
    """Kubernetes quantities for ``cpus`` (millicores) and ``memory_mb`` (MiB), as both
    requests and limits."""
    quantities = {"cpu": f"{max(1, math.ceil(cpus * 1000))}m", "memory": f"{memory_mb}Mi"}
    return {"requests": dict(quantities), "limits": dict(quantities)}


class CoreWeaveSandboxBackend(RunnerBackend):
    """Episodes in CoreWeave Sandboxes, one warm runner per slot.

    Args:
        resolve: Maps an image name to its recipe.
        api_key: ``CWSANDBOX_API_KEY`` (sent as ``Authorization: Bearer``).
        image: The container image every slot runs (``ANALYST_ENV_COREWEAVE_IMAGE``).
        base_url: ``CWSANDBOX_BASE_URL`` (CoreWeave's API when None; ``http://`` is insecure).
        cpus, memory_mb: Sizing when a recipe sets none.
        lifetime_s: ``max_lifetime_seconds`` of each sandbox; idle slots are replaced at half.
        connect_timeout_s: Bound on each control-plane call at start-up.
        request_timeout_s: The SDK's bound on each later API call (create, file writes, status).
        boot_timeout_s: How long a new sandbox and its runner may take to be ready.
        warm, max_episodes: See ``RunnerBackend``.

    Raises:
        BackendUnavailable: Credentials, image or SDK missing, or CoreWeave unreachable or
            refusing the key.
    """

    name = "coreweave"

    def __init__(
        self,
        resolve: Callable[[str], Recipe],
        *,
        api_key: str | None,
        image: str | None,
        base_url: str | None = None,
        cpus: float = 1.0,
        memory_mb: int = 4096,
        lifetime_s: int = 6 * 3600,
        connect_timeout_s: float = 10.0,
        request_timeout_s: float = 60.0,
        boot_timeout_s: float = 300.0,
        warm: int = 1,
        max_episodes: int = 200,
    ) -> None:
        missing = [
            name
            for name, value in (
                ("CWSANDBOX_API_KEY", api_key),
                ("ANALYST_ENV_COREWEAVE_IMAGE", image),
            )
            if not value
        ]
        if missing:
            raise BackendUnavailable(
                f"the coreweave backend needs {' and '.join(missing)}: set CWSANDBOX_API_KEY to "
                "an API key and ANALYST_ENV_COREWEAVE_IMAGE to an image the cluster can pull "
                "holding the recipes' packages (docs/backends.md, CoreWeave)"
            )
        assert api_key is not None and image is not None
        self.sdk = import_sdk("cwsandbox", "coreweave")
        self.image = image
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self.cpus, self.memory_mb, self.lifetime_s = cpus, memory_mb, lifetime_s
        self.request_timeout_s, self.boot_timeout_s = request_timeout_s, boot_timeout_s
        self._auth = self.sdk.AuthHeaders(
            headers={"Authorization": f"Bearer {api_key}"}, strategy="api_key"
        )
        try:  # one cheap authenticated call, so a bad key stops the server at start-up
            call_within(
                connect_timeout_s,
                f"CoreWeave Sandbox (API at {self.base_url})",
                lambda: self.sdk.Sandbox.list(
                    tags=[TAG],
                    base_url=self.base_url,
                    auth=self._auth,
                    timeout_seconds=connect_timeout_s,
                ).result(),
            )
        except self.sdk.CWSandboxError as exc:
            raise BackendUnavailable(
                f"CoreWeave Sandbox at {self.base_url} refused the request: {exc}"
            ) from None
        self._bundle = runner_bundle()
        super().__init__(resolve, warm=warm, max_episodes=max_episodes)

    def artifact_name(self, recipe: Recipe) -> str:
        """The operator's image: every recipe runs in it (nothing is built here)."""
        return self.image

    def _prepare_image(self, image: str, recipe: Recipe, log: BuildLog) -> None:
        log(f"coreweave: {image} runs in {self.image} (built and pushed by the operator)")

    def _create_options(self, image: str, recipe: Recipe) -> dict[str, Any]:
        """The ``Sandbox.run`` options of a new slot (what ``CreateSandbox`` carries)."""
        sdk = self.sdk
        return {
            "container_image": self.image,
            "defaults": sdk.SandboxDefaults(base_url=self.base_url),
            "auth": self._auth,
            "resources": sdk.ResourceOptions(
                **resources(recipe.cpus or self.cpus, recipe.memory_mb or self.memory_mb)
            ),
            "network": sdk.NetworkOptions(deny_egress=True, deny_ingress=True),
            "max_lifetime_seconds": self.lifetime_s,
            "tags": [TAG, f"{TAG}-image-{image}"],
            "request_timeout_seconds": self.request_timeout_s,
        }

    def _create_slot(self, image: str, recipe: Recipe) -> Slot:
        sdk = self.sdk
        try:
            sandbox = sdk.Sandbox.run(**self._create_options(image, recipe))
        except sdk.CWSandboxError as exc:
            raise SandboxError(f"CoreWeave could not create a sandbox: {exc}") from exc
        created = time.monotonic()

        def delete() -> None:
            sandbox.stop(missing_ok=True, graceful_shutdown_seconds=0).result(timeout=60)

        def upload(data: bytes, path: str) -> None:
            sandbox.wait(timeout=self.boot_timeout_s)
            sandbox.write_file(path, data).result(timeout=120)

        def run(command: str) -> tuple[int, str]:
            done = sandbox.exec(["sh", "-c", command], timeout_seconds=120).result()
            return done.returncode, (done.stderr or "") + (done.stdout or "")

        def relay(command: str) -> QueueChannel:
            # The SDK bounds an exec by request_timeout_seconds unless told otherwise: the
            # relay lives as long as its sandbox may.
            process = sandbox.exec(
                ["sh", "-c", command], stdin=True, timeout_seconds=float(self.lifetime_s)
            )
            return exec_channel(process)

        label = f"CoreWeave sandbox {sandbox.sandbox_id}"
        calls = SlotCalls(label, upload, run, relay, delete, sdk.CWSandboxError)
        client = start_relayed_runner(calls, recipe, self._bundle, self.boot_timeout_s)
        return Slot(client, delete, meta={"created": created, "sandbox": sandbox})

    def _slot_usable(self, slot: Slot) -> bool:
        # Replace a sandbox well before its max lifetime could end it under an episode.
        return time.monotonic() - slot.meta["created"] < self.lifetime_s / 2


def from_settings(settings: BackendSettings) -> CoreWeaveSandboxBackend:
    """The backend ``make_backend`` builds: ``CWSANDBOX_API_KEY`` and ``CWSANDBOX_BASE_URL`` as
    the SDK reads them, the image from ``ANALYST_ENV_COREWEAVE_IMAGE``."""
    return CoreWeaveSandboxBackend(
        artifacts.settings_resolver(settings, "coreweave"),
        api_key=os.environ.get("CWSANDBOX_API_KEY") or None,
        image=settings.coreweave_image,
        base_url=os.environ.get("CWSANDBOX_BASE_URL") or None,
        cpus=settings.cpu_limit,
        memory_mb=settings.memory_limit_mb,
        connect_timeout_s=settings.backend_connect_timeout_s,
        warm=settings.remote_warm_slots,
    )
