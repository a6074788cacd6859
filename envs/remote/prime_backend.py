"""The Prime Intellect backend: one Prime sandbox (a VM) per slot, running the slot runner.

Per recipe an image is built once by Prime's image service from the recipe's Dockerfile
(``dockerfile.dockerfile(recipe, runner_baked=False)``), named
``analyst-env-<hash>-r<rev>:latest``; later servers find it in the image list. Build states
map onto the baked-image lifecycle: ``PENDING``/``UPLOADING``/``BUILDING`` are building,
``COMPLETED`` is ready, ``FAILED``/``CANCELLED`` are refused with Prime's ``errorMessage``.

Per slot a sandbox is created from the image with an empty network allow-list (nothing
allowed out), receives the runner's code as one archive (``relayed_runner``, as on Daytona),
and runs the runner behind ``line_relay`` as a live process (``prime_link``). Every SDK call
goes through ``AsyncSandboxClient`` on one ``SdkLoop``: the live process exists only there.
"""

from __future__ import annotations

import io
import math
import os
import tarfile
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import httpx

from analyst_env.envs.recipes.recipe import Recipe
from analyst_env.envs.remote import artifacts, runner_image
from analyst_env.envs.remote.bounded import (
    first_call,
    import_sdk,
    require_api_key,
)
from analyst_env.envs.remote.dockerfile import dockerfile
from analyst_env.envs.remote.options import Sizing, Timeouts, WarmPool, options_from_settings
from analyst_env.envs.remote.prime_link import process_channel
from analyst_env.envs.remote.relayed_runner import SlotCalls, runner_bundle, start_relayed_runner
from analyst_env.envs.remote.sdk_loop import SdkLoop
from analyst_env.envs.remote.slots import BuildLog, RunnerBackend, Slot, before_half_life
from analyst_env.envs.remote.vendor_builds import furthest_build, wait_while_building
from analyst_env.envs.sandbox import SandboxError

if TYPE_CHECKING:
    from analyst_env.envs.backends import BackendSettings

_BUILDING = ("PENDING", "UPLOADING", "BUILDING")
_FAILED = ("FAILED", "CANCELLED")
#: The tag of every image this backend builds (the name carries the hash and revision).
IMAGE_TAG = "latest"


def _building(row: Any) -> bool:
    return row is not None and row.status.value in _BUILDING


def build_context(text: str) -> bytes:
    """A gzipped tar holding only ``Dockerfile``: the build context Prime receives."""
    buffer = io.BytesIO()
    data = text.encode()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size, info.mode = len(data), 0o644
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


class PrimeSandboxBackend(RunnerBackend):
    """Episodes in Prime Intellect sandboxes, one warm runner per slot.

    Args:
        resolve: Maps an image name to its recipe.
        api_key: ``PRIME_API_KEY``.
        base_url: ``PRIME_API_BASE_URL`` (Prime's cloud when None).
        sizing: ``cpus``, ``memory_mb`` and ``disk_mb`` when a recipe sets none, rounded up to
            whole cores and GiB; the disk holds the image too (Prime's default is 5 GiB).
        timeouts: ``connect_s`` bounds the control-plane call at start-up, ``boot_s`` a new
            sandbox and its runner to be ready, ``build_s`` an image's build, ``sandbox_s``
            a sandbox's lifetime (Prime's ``timeout_minutes``; slots go at half of it).
        pool: See ``RunnerBackend``.

    Raises:
        BackendUnavailable: Credentials or SDK missing, or Prime unreachable in time.
    """

    name = "prime"

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
        api_key = require_api_key(api_key, "prime", "PRIME_API_KEY", "PRIME_API_BASE_URL", "Prime")
        self.sdk = import_sdk("prime_sandboxes", "prime")
        self.sizing, self.timeouts = sizing or self.sizing, timeouts or self.timeouts
        self._loop = SdkLoop("Prime")
        self._client, self._images = self._loop.run(self._clients(api_key, base_url))
        where = self._client.client.base_url
        first_call(
            self.timeouts.connect_s,
            "Prime",
            where,
            lambda: self._loop.run(self._client.list(per_page=1)),
            refused=self.sdk.APIError,
        )
        self._image_paths: dict[str, str] = {}
        self._bundle = runner_bundle()
        super().__init__(resolve, pool=pool)

    async def _clients(self, api_key: str, base_url: str | None) -> tuple[Any, Any]:
        """The SDK's clients, made on the loop they will run on."""
        client = self.sdk.AsyncSandboxClient(api_key=api_key)
        if base_url:
            client.client.base_url = base_url.rstrip("/").removesuffix("/api/v1")
        return client, self.sdk.AsyncImageClient(client.client)

    def artifact_name(self, recipe: Recipe) -> str:
        """``analyst-env-<hash>-r<rev>``: one image per recipe (sizing is set per sandbox)."""
        return "analyst-env-" + runner_image.artifact_tag(recipe)

    def _find_image(self, name: str) -> Any | None:
        page = self._loop.run(self._images.list(search=name, limit=250), self.timeouts.connect_s)
        rows = [row for row in page.data if row.image_name == name and row.image_tag == IMAGE_TAG]
        return furthest_build(
            rows, ready=lambda row: row.status.value == "COMPLETED", building=_building
        )

    def _start_build(self, name: str, recipe: Recipe, log: BuildLog) -> None:
        request = self.sdk.BuildImageRequest(image_name=name, image_tag=IMAGE_TAG)
        build = self._loop.run(self._images.initiate_build(request), self.timeouts.connect_s)
        context = build_context(dockerfile(recipe, runner_baked=False))
        httpx.put(build.upload_url, content=context, timeout=self.timeouts.connect_s * 6)
        self._loop.run(self._images.start_build(build.build_id), self.timeouts.connect_s)
        log(f"prime: building image {name} (build {build.build_id})")

    def _prepare_image(self, image: str, recipe: Recipe, log: BuildLog) -> None:
        name = self.artifact_name(recipe)
        try:
            row = self._find_image(name)
            if row is None:
                self._start_build(name, recipe, log)
                row = self._find_image(name)
            row = wait_while_building(
                row, lambda: self._find_image(name), _building, self.timeouts.build_s
            )
            if row is not None and _building(row):  # the build's time is up
                raise SandboxError(f"Prime image {name} is still {row.status.value}")
        except (self.sdk.APIError, httpx.HTTPError, TimeoutError) as exc:
            raise SandboxError(f"Prime could not build image {name}: {exc}") from exc
        if row is None or row.status.value in _FAILED:
            reason = row.error_message if row is not None else "it is not listed"
            raise SandboxError(
                f"Prime image {name} failed to build ({reason}); "
                f"delete it (prime images delete) to build it again"
            )
        self._image_paths[image] = row.full_image_path or f"{name}:{IMAGE_TAG}"

    def _create_request(self, image: str, recipe: Recipe) -> Any:
        disk_mb = recipe.disk_mb or self.sizing.disk_mb
        return self.sdk.CreateSandboxRequest(
            name=f"analyst-env-{uuid.uuid4().hex[:8]}",
            docker_image=self._image_paths[image],
            cpu_cores=max(1, math.ceil(recipe.cpus or self.sizing.cpus)),
            memory_gb=max(1, math.ceil((recipe.memory_mb or self.sizing.memory_mb) / 1024)),
            disk_size_gb=math.ceil(disk_mb / 1024) if disk_mb else None,
            timeout_minutes=max(1, math.ceil(self.timeouts.sandbox_s / 60)),
            network_allowlist=[],  # an empty allow-list: nothing goes out
            labels=["analyst-env"],
        )

    def _create_slot(self, image: str, recipe: Recipe) -> Slot:
        client, loop, boot_s = self._client, self._loop, self.timeouts.boot_s
        errors = (self.sdk.APIError, self.sdk.SandboxNotRunningError, TimeoutError)
        try:
            sandbox = loop.run(client.create(self._create_request(image, recipe)), boot_s)
        except errors as exc:
            raise SandboxError(f"Prime could not create a sandbox: {exc}") from exc
        created = time.monotonic()

        def delete() -> None:
            loop.run(client.delete(sandbox.id), self.timeouts.connect_s)

        def upload(data: bytes, path: str) -> None:  # the slot's first call: wait for it
            loop.run(client.wait_for_creation(sandbox.id), boot_s)
            loop.run(client.upload_bytes(sandbox.id, path, data, "runner.tar.gz"), boot_s)

        def run(command: str) -> tuple[int, str]:
            done = loop.run(client.execute_command(sandbox.id, command, timeout=60), 90)
            return done.exit_code, done.stderr + done.stdout

        def relay(command: str) -> Any:
            return process_channel(loop, client, sandbox.id, command)

        calls = SlotCalls(f"Prime sandbox {sandbox.id}", upload, run, relay, delete, errors)
        runner = start_relayed_runner(calls, recipe, self._bundle, boot_s)
        return Slot(runner, delete, meta={"created": created, "sandbox": sandbox})

    def _slot_usable(self, slot: Slot) -> bool:
        # Replace a sandbox well before Prime's timeout_minutes ends it under an episode.
        return before_half_life(slot, self.timeouts.sandbox_s)

    def close(self) -> None:
        super().close()
        try:
            self._loop.run(self._client.aclose(), self.timeouts.connect_s)
        except Exception:
            pass
        self._loop.close()


def from_settings(settings: BackendSettings) -> PrimeSandboxBackend:
    """The backend ``make_backend`` builds: ``PRIME_API_KEY`` and ``PRIME_API_BASE_URL`` (or
    ``PRIME_BASE_URL``), as the Prime SDK reads them; ``PRIME_TEAM_ID`` is read by the SDK."""
    sizing, timeouts, pool = options_from_settings(settings, PrimeSandboxBackend)
    return PrimeSandboxBackend(
        artifacts.settings_resolver(settings, "prime"),
        api_key=os.environ.get("PRIME_API_KEY") or None,
        base_url=os.environ.get("PRIME_API_BASE_URL") or os.environ.get("PRIME_BASE_URL") or None,
        sizing=sizing,
        timeouts=timeouts,
        pool=pool,
    )
