"""The Docker backend: one long-lived container per slot, episodes forked inside it.

A container per episode costs 1.2 s (runc) to 2.5 s (gVisor) before pandas is
imported; forking a kernel from a warm runner costs milliseconds. So each slot
is one container whose command is the slot runner, built from the recipe's
generated Dockerfile (``remote.dockerfile``, tag ``analyst-env:<hash>-r<rev>``),
and the server talks to it over the container's attach stream (stdin in,
stdout out, multiplexed with stderr by Docker's 8-byte frame headers).

Isolation per container: no network, read-only root filesystem with tmpfs
``/work`` and ``/tmp``, all capabilities dropped, ``no-new-privileges``, an
unprivileged user, memory (no swap), CPU and pids limits from the recipe, and
optionally the gVisor runtime (``runtime="runsc"``). Between episodes the
runner kills the previous episode's processes and empties ``/work``.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any

from analyst_env.envs.recipes.recipe import Recipe
from analyst_env.envs.remote import artifacts, runner_image
from analyst_env.envs.remote.bounded import BackendUnavailable, import_sdk
from analyst_env.envs.remote.channel import QueueChannel, StderrTail
from analyst_env.envs.remote.engine_image import connect_engine, ensure_image
from analyst_env.envs.remote.options import Sizing, Timeouts, WarmPool, options_from_settings
from analyst_env.envs.remote.runner_link import RunnerClient
from analyst_env.envs.remote.slots import BuildLog, RunnerBackend, Slot

if TYPE_CHECKING:
    from analyst_env.envs.backends import BackendSettings

_FRAME = struct.Struct(">BxxxL")


def demultiplex(read: Callable[[int], bytes], stderr: StderrTail) -> Iterator[bytes]:
    """stdout chunks of a non-TTY Docker attach stream; stderr frames go to ``stderr``.

    Each frame is ``[stream, 0, 0, 0, length (big-endian u32)]`` then ``length`` bytes.
    """

    def exactly(n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            chunk = read(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    while True:
        header = exactly(_FRAME.size)
        if header is None:
            return
        stream, length = _FRAME.unpack(header)
        payload = exactly(length)
        if payload is None:
            return
        if stream == 2:
            stderr.add(payload)
        else:
            yield payload


def run_options(
    recipe: Recipe, sizing: Sizing, *, pids: int, runtime: str | None
) -> dict[str, Any]:
    """``containers.create`` keyword arguments for one slot of ``recipe``, sized by ``sizing``
    where the recipe sets no size."""
    memory = f"{recipe.memory_mb or sizing.memory_mb}m"
    options: dict[str, Any] = {
        "command": runner_image.runner_command(recipe),
        "stdin_open": True,
        "tty": False,
        "detach": True,
        "network_mode": "none",
        "read_only": True,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "user": f"{runner_image.SANDBOX_UID}:{runner_image.SANDBOX_UID}",
        "mem_limit": memory,
        "memswap_limit": memory,
        "nano_cpus": int((recipe.cpus or sizing.cpus) * 1e9),
        "pids_limit": pids,
        "tmpfs": {
            runner_image.WORKDIR: (
                f"size={recipe.disk_mb or sizing.disk_mb}m,uid={runner_image.SANDBOX_UID},"
                f"gid={runner_image.SANDBOX_UID},mode=0700"
            ),
            "/tmp": (
                f"size=256m,uid={runner_image.SANDBOX_UID},gid={runner_image.SANDBOX_UID},mode=1777"
            ),
        },
        "init": True,
        # The engine removes a slot whose runner exits, as it does when the server that
        # held its stdin dies without closing the backend (a SIGKILL, an OOM kill).
        "auto_remove": True,
        "labels": {"analyst_env.slot": "1"},
    }
    if runtime:
        options["runtime"] = runtime
    return options


class DockerSandboxBackend(RunnerBackend):
    """Episodes in local or remote Docker containers, one warm runner per slot.

    Args:
        resolve: Maps an image name to its recipe.
        base_url: The engine (``DOCKER_HOST``); the SDK's default when ``None``.
        runtime: ``None`` (runc) or ``"runsc"`` for gVisor.
        build_network: Network for image builds (e.g. ``"host"`` on an engine
            without a bridge); slots themselves never have a network.
        pids: Processes and threads per container.
        sdk: The ``docker`` module (or one with its API).
        sizing: Limits when a recipe sets none; ``disk_mb`` is the size of ``/work``.
        timeouts: ``connect_s`` bounds reaching the engine at start-up, ``boot_s`` a new
            container's runner to be ready.
        pool: See ``RunnerBackend``.

    Raises:
        BackendUnavailable: SDK missing or the engine unreachable.
        ValueError: ``sizing`` without a ``disk_mb``.
    """

    name = "docker"
    sizing = Sizing(disk_mb=1024)
    timeouts = Timeouts(connect_s=5.0, boot_s=120.0)

    def __init__(
        self,
        resolve: Callable[[str], Recipe],
        *,
        base_url: str | None = None,
        runtime: str | None = None,
        build_network: str | None = None,
        pids: int = 256,
        sdk: ModuleType | None = None,
        sizing: Sizing | None = None,
        timeouts: Timeouts | None = None,
        pool: WarmPool | None = None,
    ) -> None:
        self.sizing, self.timeouts = sizing or self.sizing, timeouts or self.timeouts
        if self.sizing.disk_mb is None:
            raise ValueError("the docker backend needs sizing.disk_mb, the size of /work")
        self.sdk = sdk if sdk is not None else import_sdk("docker", "docker")
        self.runtime = runtime
        self.build_network = build_network
        self.pids = pids
        where = base_url or "the default socket (DOCKER_HOST unset)"
        try:
            self.docker = connect_engine(self.sdk, base_url, self.timeouts.connect_s)
        except BackendUnavailable:
            raise
        except Exception as exc:
            raise BackendUnavailable(f"cannot reach the Docker engine at {where}: {exc}") from None
        if runtime and runtime not in (self.docker.info().get("Runtimes") or {}):
            raise BackendUnavailable(
                f"the Docker engine has no {runtime!r} runtime (install and register gVisor)"
            )
        self._tags: dict[str, str] = {}
        super().__init__(resolve, pool=pool)

    def _prepare_image(self, image: str, recipe: Recipe, log: BuildLog) -> None:
        tag = self.artifact_name(recipe)
        ensure_image(self.docker, self.sdk, recipe, tag, build_network=self.build_network)
        self._tags[image] = tag

    def _create_slot(self, image: str, recipe: Recipe) -> Slot:
        options = run_options(recipe, self.sizing, pids=self.pids, runtime=self.runtime)
        options.pop("detach")
        container = self.docker.containers.create(self._tags[image], **options)
        try:
            # Attach before starting, so the runner's first frame is not missed.
            sock = self.docker.api.attach_socket(
                container.id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
            raw = getattr(sock, "_sock", sock)
            container.start()
            tail = StderrTail()
            channel = QueueChannel(
                demultiplex(raw.recv, tail),
                raw.sendall,
                lambda: raw.close(),
                tail.text,
            )
            client = RunnerClient(channel, f"docker container {container.short_id}")
            client.wait_ready(self.timeouts.boot_s)
        except BaseException:
            _remove(container)
            raise
        return Slot(client, lambda: _remove(container), meta={"container": container.id})


def _remove(container: Any) -> None:
    """Remove a slot's container, which the engine may already be removing (``auto_remove``
    once its runner exited)."""
    import docker.errors

    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if exc.status_code != 409:  # 409: removal already in progress
            raise


def from_settings(settings: BackendSettings) -> DockerSandboxBackend:
    """The backend ``make_backend`` builds: the Docker engine from ``DOCKER_HOST`` (or the
    default socket)."""
    sizing, timeouts, pool = options_from_settings(settings, DockerSandboxBackend, disk=True)
    return DockerSandboxBackend(
        artifacts.settings_resolver(settings, "docker"),
        base_url=os.environ.get("DOCKER_HOST") or None,
        runtime=settings.docker_runtime,
        pids=settings.pids_limit,
        sizing=sizing,
        timeouts=timeouts,
        pool=pool,
    )
