"""The OpenSandbox backend: one OpenSandbox sandbox per slot, running the slot runner.

OpenSandbox (alibaba/OpenSandbox) is an open-source sandbox platform: a
FastAPI control plane (``opensandbox-server``) that starts containers on
Docker or Kubernetes and puts its daemon, execd, in each. Every call here goes
through its Python SDK (``opensandbox``), given as ``sdk``, except the one the
SDK does not wrap: a process's stdin, which the runner needs; that is execd's
pipe WebSocket (``execd_pipe``), reached at the execd endpoint and with the
headers the SDK reports.

Per image (recipe), the runner image is built once on the local Docker engine
from the recipe's generated Dockerfile (``engine_image``, tag
``analyst-env:<hash>-r<rev>``, as the Docker backend builds it), which an
OpenSandbox server with the Docker runtime on the same engine runs as is; or
every episode runs one given ``image`` (an operator-built runner image in a
registry the server pulls from). Per slot a sandbox is created from it with
the recipe's cpu and memory and, unless told otherwise, a deny-all egress
policy (enforced by the server's egress sidecar), and the runner is started in
it. Episodes are forked inside it.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from analyst_env.envs.capabilities import BackendCapabilities
from analyst_env.envs.fork_env import SINGLE_THREADED_ENV
from analyst_env.envs.recipes.recipe import Recipe
from analyst_env.envs.remote import artifacts, runner_image
from analyst_env.envs.remote.bounded import BackendUnavailable, call_within, import_sdk
from analyst_env.envs.remote.engine_image import connect_engine, ensure_image
from analyst_env.envs.remote.execd_pipe import EXECD_PORT, open_pipe
from analyst_env.envs.remote.options import Sizing, Timeouts, WarmPool, options_from_settings
from analyst_env.envs.remote.runner_link import RunnerClient
from analyst_env.envs.remote.slots import BuildLog, RunnerBackend, Slot, before_half_life
from analyst_env.envs.sandbox import SandboxError

if TYPE_CHECKING:
    from analyst_env.envs.backends import BackendSettings

EGRESS_CHOICES = ("deny", "allow")


class OpenSandboxBackend(RunnerBackend):
    """Episodes in OpenSandbox sandboxes, one warm runner per slot.

    Args:
        resolve: Maps an image name to its recipe.
        domain: The server (``OPEN_SANDBOX_DOMAIN``, e.g. ``localhost:8080`` or
            ``https://sandbox.example.com``).
        api_key: ``OPEN_SANDBOX_API_KEY``, when the server requires one.
        image: Run every episode from this image instead of building one per recipe.
        egress: ``deny`` (no network: a deny-all policy, which needs the server's egress
            sidecar) or ``allow`` (the container network the server gives).
        docker_host: The engine to build on (``DOCKER_HOST``; the SDK default when None).
        build_network: Network for image builds (e.g. ``host``).
        sizing: ``cpus`` and ``memory_mb`` when a recipe sets none.
        timeouts: ``connect_s`` bounds each control-plane call at start-up (and reaching
            the Docker engine), ``boot_s`` a new sandbox and its runner to be ready;
            ``sandbox_s`` is a sandbox's lifetime (slots are retired at half of it).
        pool: See ``RunnerBackend``.

    Raises:
        BackendUnavailable: SDK missing, server unreachable or refusing the key in time,
            or (when building) the Docker SDK missing or the engine unreachable.
    """

    name = "opensandbox"
    timeouts = Timeouts(boot_s=120.0)

    def __init__(
        self,
        resolve: Callable[[str], Recipe],
        *,
        domain: str | None,
        api_key: str | None = None,
        image: str | None = None,
        egress: str = "deny",
        docker_host: str | None = None,
        build_network: str | None = None,
        sizing: Sizing | None = None,
        timeouts: Timeouts | None = None,
        pool: WarmPool | None = None,
    ) -> None:
        if egress not in EGRESS_CHOICES:
            raise ValueError(f"egress must be one of {EGRESS_CHOICES}, not {egress!r}")
        if not domain:
            raise BackendUnavailable(
                "the opensandbox backend needs its server: set OPEN_SANDBOX_DOMAIN "
                "(e.g. localhost:8080, where `opensandbox-server` listens)"
            )
        self.sdk = import_sdk("opensandbox", "opensandbox")
        for part in ("config", "exceptions", "models", "sync"):
            import_sdk(f"opensandbox.{part}", "opensandbox")
        self.fixed_image, self.egress, self.build_network = image, egress, build_network
        self.sizing, self.timeouts = sizing or self.sizing, timeouts or self.timeouts
        connect_s = self.timeouts.connect_s
        self.capabilities = BackendCapabilities(
            network="none" if egress == "deny" else "host", warm_pool=True, verify_commands=True
        )
        self._config = self.sdk.config.ConnectionConfigSync(
            domain=domain,
            api_key=api_key,
            request_timeout=timedelta(seconds=max(connect_s, 30.0)),
        )
        self._protocol = self._config.protocol
        if domain.startswith("https://"):
            self._protocol = "https"
        manager = self.sdk.sync.SandboxManagerSync
        try:
            self._manager = call_within(
                connect_s,
                f"the OpenSandbox server at {domain}",
                lambda: manager.create(connection_config=self._config),
            )
            call_within(
                connect_s,
                f"the OpenSandbox server at {domain}",
                lambda: self._manager.list_sandbox_infos(
                    self.sdk.models.SandboxFilter(page_size=1)
                ),
            )
        except BackendUnavailable:
            raise
        except self.sdk.exceptions.SandboxException as exc:
            raise BackendUnavailable(
                f"the OpenSandbox server at {domain} did not serve the backend (is it running, "
                f"and OPEN_SANDBOX_API_KEY right?): {exc}"
            ) from None
        self._docker: Any = None
        if image is None:
            docker_sdk = import_sdk("docker", "docker")
            try:
                self._docker = connect_engine(docker_sdk, docker_host, connect_s)
            except BackendUnavailable:
                raise
            except Exception as exc:
                raise BackendUnavailable(
                    "the opensandbox backend builds its images on the local Docker engine "
                    f"and cannot reach it ({exc}); set ANALYST_ENV_OPENSANDBOX_IMAGE to "
                    "run a prebuilt image instead"
                ) from None
            self._docker_sdk = docker_sdk
        self._images: dict[str, str] = {}
        super().__init__(resolve, pool=pool)

    def artifact_name(self, recipe: Recipe) -> str:
        """The image sandboxes of ``recipe`` run."""
        return self.fixed_image or runner_image.image_reference(recipe)

    def _prepare_image(self, image: str, recipe: Recipe, log: BuildLog) -> None:
        tag = self.artifact_name(recipe)
        if self.fixed_image is None:
            ensure_image(
                self._docker, self._docker_sdk, recipe, tag, build_network=self.build_network
            )
        self._images[image] = tag

    def _create_slot(self, image: str, recipe: Recipe) -> Slot:
        cpus = recipe.cpus or self.sizing.cpus
        memory = recipe.memory_mb or self.sizing.memory_mb
        policy = (
            self.sdk.models.NetworkPolicy(default_action="deny", egress=[])
            if self.egress == "deny"
            else None
        )
        try:
            sandbox = self.sdk.sync.SandboxSync.create(
                self._images[image],
                timeout=timedelta(seconds=self.timeouts.sandbox_s),
                ready_timeout=timedelta(seconds=self.timeouts.boot_s),
                resource={"cpu": f"{cpus:g}", "memory": f"{memory}Mi"},
                network_policy=policy,
                metadata={"analyst_env.slot": "1"},
                connection_config=self._config,
            )
        except self.sdk.exceptions.SandboxException as exc:
            raise SandboxError(f"OpenSandbox did not create a sandbox: {exc}") from exc
        created = time.monotonic()
        try:
            endpoint = sandbox.get_endpoint(EXECD_PORT)
            channel, delete_session = open_pipe(
                endpoint.endpoint,
                endpoint.build_request_headers(self._config),
                runner_image.runner_command(recipe),
                env=SINGLE_THREADED_ENV,
                protocol=self._protocol,
                timeout_s=self.timeouts.boot_s,
            )
            client = RunnerClient(channel, f"opensandbox sandbox {sandbox.id}")
            client.wait_ready(self.timeouts.boot_s)
        except BaseException:
            with contextlib.suppress(Exception):  # the error that got here is the one to report
                _kill(sandbox)
            raise

        def destroy() -> None:
            delete_session()
            _kill(sandbox)

        return Slot(client, destroy, meta={"created": created, "sandbox": sandbox.id})

    def _slot_usable(self, slot: Slot) -> bool:
        # Retire a sandbox well before the server's timeout ends it under an episode.
        return before_half_life(slot, self.timeouts.sandbox_s)

    def close(self) -> None:
        super().close()
        try:
            self._manager.close()
        except Exception:
            pass


def _kill(sandbox: Any) -> None:
    """Delete ``sandbox`` on the server and release its HTTP clients."""
    try:
        sandbox.kill()
    finally:
        sandbox.close()


def from_settings(settings: BackendSettings) -> OpenSandboxBackend:
    """The backend ``make_backend`` builds: the server from ``OPEN_SANDBOX_DOMAIN`` (and
    ``OPEN_SANDBOX_API_KEY``), images built on ``DOCKER_HOST``'s engine."""
    sizing, timeouts, pool = options_from_settings(settings, OpenSandboxBackend)
    return OpenSandboxBackend(
        artifacts.settings_resolver(settings, "opensandbox"),
        domain=os.environ.get("OPEN_SANDBOX_DOMAIN") or None,
        api_key=os.environ.get("OPEN_SANDBOX_API_KEY") or None,
        image=settings.opensandbox_image,
        egress=settings.opensandbox_egress,
        docker_host=os.environ.get("DOCKER_HOST") or None,
        sizing=sizing,
        timeouts=timeouts,
        pool=pool,
    )
