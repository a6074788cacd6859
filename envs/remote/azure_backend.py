"""The Azure backend: one Azure Container Apps sandbox (a microVM) per slot, running the runner.

Through the vendor's SDK, ``azure-containerapps-sandbox`` (preview API
``2026-02-01-preview``). Per image (recipe) a *disk image* is made once from the OCI
image ``<registry>/analyst-env:<tag>``, which the operator builds from the recipe's
Dockerfile (``dockerfile.dockerfile(recipe, runner_baked=False)``) and pushes; it is
labelled ``analyst-env-<tag>`` and later servers find it by that label. Its
``status.state`` maps onto the baked-image lifecycle: ``Pending`` and ``Building`` are
building, ``Ready`` is ready, ``Failed`` is refused with Azure's ``status.message``.

Per slot a sandbox is created from the disk image under an egress policy that denies
everything, with the recipe's CPU and memory. Each new slot receives the runner's code
as one archive (``relayed_runner``), and the runner is started detached behind
``spool_relay``: Azure runs commands only to their end, so the channel is made of short
requests (``azure_link``), at a cost of about two requests per message (docs/backend-azure.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypedDict

from analyst_env.envs.capabilities import BackendCapabilities
from analyst_env.envs.recipes.recipe import Recipe
from analyst_env.envs.remote import artifacts, runner_image
from analyst_env.envs.remote.azure_link import spooled_channel, start_command
from analyst_env.envs.remote.bounded import BackendUnavailable, call_within, import_sdk
from analyst_env.envs.remote.options import Sizing, Timeouts, WarmPool, options_from_settings
from analyst_env.envs.remote.relayed_runner import BUNDLE_PATH, runner_bundle, unpack_command
from analyst_env.envs.remote.runner_link import RunnerClient
from analyst_env.envs.remote.slots import BuildLog, RunnerBackend, Slot
from analyst_env.envs.remote.vendor_builds import furthest_build, wait_while_building
from analyst_env.envs.sandbox import SandboxError

if TYPE_CHECKING:
    from analyst_env.envs.backends import BackendSettings

_READY = ("ready", "succeeded")
#: The variables that name the sandbox group and the image registry, all required.
REQUIRED = (
    "AZURE_SUBSCRIPTION_ID",
    "AZURE_RESOURCE_GROUP",
    "AZURE_SANDBOX_GROUP",
    "AZURE_SANDBOX_REGISTRY",
)


class AzureGroup(TypedDict):
    """Where the backend's sandboxes and images live (``AzureSandboxBackend``'s arguments)."""

    endpoint: str
    subscription_id: str
    resource_group: str
    sandbox_group: str
    registry: str


def _state(image: Any) -> str:
    return (image.status.state if image.status else "").lower()


def _ready(image: Any) -> bool:
    return _state(image) in _READY


def _building(image: Any) -> bool:
    return _state(image) not in (*_READY, "failed")


class AzureSandboxBackend(RunnerBackend):
    """Episodes in Azure Container Apps sandboxes, one warm runner per slot.

    Args:
        resolve: Maps an image name to its recipe.
        endpoint: The data-plane endpoint (``https://management.<region>.azuredevcompute.io``).
        subscription_id, resource_group, sandbox_group: The sandbox group.
        registry: Where the recipes' runner images are pushed (``myacr.azurecr.io/team``).
        credential: An azure-identity ``TokenCredential`` (``DefaultAzureCredential`` when None).
        poll_wait_s: How long each long-poll for runner output waits.
        sizing: ``cpus`` and ``memory_mb`` when a recipe sets none.
        timeouts: ``connect_s`` bounds the authenticated call at start-up, ``boot_s`` a new
            sandbox and its runner to be ready, ``build_s`` a disk image's build.
        pool: See ``RunnerBackend``.

    Raises:
        BackendUnavailable: Settings or SDK missing, or Azure refused or did not answer in time.
    """

    name = "azure"
    # As every slot backend: the kernel stays persistent (the runner lives on behind the spool,
    # at about two requests per message), files go through the runner, limits and a deny-all
    # egress policy per sandbox, slots kept warm (Azure has no warm pool of its own). Not used:
    # Azure's stop/resume.
    capabilities = BackendCapabilities(network="none", warm_pool=True, verify_commands=True)

    def __init__(
        self,
        resolve: Callable[[str], Recipe],
        *,
        endpoint: str,
        subscription_id: str,
        resource_group: str,
        sandbox_group: str,
        registry: str,
        credential: Any = None,
        poll_wait_s: float = 20.0,
        sizing: Sizing | None = None,
        timeouts: Timeouts | None = None,
        pool: WarmPool | None = None,
    ) -> None:
        self.sdk = import_sdk("azure.containerapps.sandbox", "azure")
        from azure.core.exceptions import AzureError

        self._errors: tuple[type[BaseException], ...] = (AzureError, RuntimeError, ValueError)
        if credential is None:
            from azure.identity import DefaultAzureCredential

            credential = DefaultAzureCredential()
        self.registry = registry.rstrip("/")
        self.sizing, self.timeouts = sizing or self.sizing, timeouts or self.timeouts
        self.poll_wait_s = poll_wait_s
        where = f"Azure sandbox group {sandbox_group} at {endpoint}"
        try:
            self._group = self.sdk.SandboxGroupClient(
                endpoint,
                credential,
                subscription_id=subscription_id,
                resource_group=resource_group,
                sandbox_group=sandbox_group,
            )
            call_within(self.timeouts.connect_s, where, self._first_image)
        except self._errors as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise BackendUnavailable(f"{where} refused the request: {first}") from None
        self._disk_images: dict[str, str] = {}
        self._bundle = runner_bundle()
        super().__init__(resolve, pool=pool)

    def _first_image(self) -> None:
        """One cheap authenticated call: the credential, the role and the group all work."""
        next(iter(self._group.list_disk_images()), None)

    def artifact_name(self, recipe: Recipe) -> str:
        """``analyst-env-<hash>-r<rev>``: the label of the recipe's disk image."""
        return "analyst-env-" + runner_image.artifact_tag(recipe)

    def image_reference(self, recipe: Recipe) -> str:
        """The OCI image the disk image is made from (the operator pushes it there)."""
        return f"{self.registry}/{runner_image.image_reference(recipe)}"

    def _lookup(self, name: str) -> Any | None:
        found = [i for i in self._group.list_disk_images() if i.labels.get("name") == name]
        return furthest_build(found, ready=_ready, building=_building)

    def _prepare_image(self, image: str, recipe: Recipe, log: BuildLog) -> None:
        name = self.artifact_name(recipe)
        try:
            disk = self._lookup(name)
            if disk is None:
                disk = self._group.create_disk_image(self.image_reference(recipe), name=name)
            disk_id = disk.id
            disk = wait_while_building(
                disk, lambda: self._group.get_disk_image(disk_id), _building, self.timeouts.build_s
            )
        except self._errors as exc:
            raise SandboxError(f"Azure could not build disk image {name}: {exc}") from exc
        if _state(disk) == "failed":
            reason = disk.status.message if disk.status else None
            raise SandboxError(
                f"Azure disk image {name} failed to build ({reason}) from "
                f"{self.image_reference(recipe)}; push the recipe's runner image there "
                f"(docs/backend-azure.md) and delete disk image {disk.id} to build it again"
            )
        if not _ready(disk):
            raise SandboxError(f"Azure disk image {name} is {_state(disk) or 'pending'}, not ready")
        self._disk_images[image] = str(disk.id)

    def _create_slot(self, image: str, recipe: Recipe) -> Slot:
        try:
            sandbox = self._group.begin_create_sandbox(
                disk_id=self._disk_images[image],
                cpu=f"{max(1, round((recipe.cpus or self.sizing.cpus) * 1000))}m",
                memory=f"{recipe.memory_mb or self.sizing.memory_mb}Mi",
                egress_policy=self.sdk.EgressPolicy(default_action="Deny"),
                labels={"app": "analyst-env", "image": image},
                polling_timeout=int(self.timeouts.boot_s),
                polling_interval=1,
            ).result()
        except self._errors as exc:
            raise SandboxError(f"Azure could not create a sandbox: {exc}") from exc

        def shutdown() -> None:
            sandbox.delete()

        try:
            sandbox.write_file(BUNDLE_PATH, self._bundle)
            unpacked = sandbox.exec(unpack_command())
            if unpacked.exit_code != 0:
                raise SandboxError(f"unpacking the runner failed: {unpacked.stderr[-500:]}")
            started = sandbox.exec(start_command(recipe))
            if started.exit_code != 0:
                raise SandboxError(f"starting the runner failed: {started.stderr[-500:]}")
            channel = spooled_channel(sandbox, wait_s=self.poll_wait_s)
            client = RunnerClient(channel, f"azure sandbox {sandbox.sandbox_id}")
            client.wait_ready(self.timeouts.boot_s)
        except BaseException as exc:
            try:
                shutdown()
            except Exception:
                pass
            if isinstance(exc, self._errors):
                what = f"Azure sandbox {sandbox.sandbox_id} could not start"
                raise SandboxError(f"{what}: {exc}") from exc
            raise
        return Slot(client, shutdown, meta={"sandbox": sandbox})


def settings_from_env(environ: Mapping[str, str] = os.environ) -> AzureGroup:
    """The sandbox group, endpoint and registry from the environment, or one line naming
    what is missing.

    Raises:
        BackendUnavailable: A variable is unset.
    """
    missing = [name for name in REQUIRED if not environ.get(name)]
    endpoint = environ.get("AZURE_SANDBOX_ENDPOINT") or ""
    if not endpoint and environ.get("AZURE_REGION"):
        endpoint = f"https://management.{environ['AZURE_REGION']}.azuredevcompute.io"
    if not endpoint:
        missing.append("AZURE_REGION (or AZURE_SANDBOX_ENDPOINT)")
    if missing:
        raise BackendUnavailable(
            "the azure backend needs its sandbox group and image registry: set "
            + ", ".join(missing)
            + " (the token comes from azure-identity: AZURE_CLIENT_ID/AZURE_TENANT_ID/"
            "AZURE_CLIENT_SECRET or az login)"
        )
    return {
        "endpoint": endpoint,
        "subscription_id": environ["AZURE_SUBSCRIPTION_ID"],
        "resource_group": environ["AZURE_RESOURCE_GROUP"],
        "sandbox_group": environ["AZURE_SANDBOX_GROUP"],
        "registry": environ["AZURE_SANDBOX_REGISTRY"],
    }


def from_settings(settings: BackendSettings) -> AzureSandboxBackend:
    """The backend ``make_backend`` builds, from the variables ``settings_from_env`` reads."""
    sizing, timeouts, pool = options_from_settings(settings, AzureSandboxBackend)
    return AzureSandboxBackend(
        artifacts.settings_resolver(settings, "azure"),
        **settings_from_env(),
        sizing=sizing,
        timeouts=timeouts,
        pool=pool,
    )
