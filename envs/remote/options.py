"""The options every remote backend takes: a sandbox's size, its time bounds, its warm pool.

Every remote backend sizes a sandbox, bounds the calls it makes to its service and (all but
E2B) keeps warm slots, so these are three small frozen objects that any backend's constructor
takes, as httpx's ``Timeout`` and ``Limits`` are for its clients, instead of the same loose
keywords repeated with their defaults on every backend. A backend whose defaults differ says
so once, in its class attributes (``DockerSandboxBackend.timeouts``); to change one field,
start from those: ``dataclasses.replace(DockerSandboxBackend.timeouts, boot_s=60)``.
``options_from_settings`` is the one place the server's settings become options.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, NamedTuple, Protocol

if TYPE_CHECKING:
    from analyst_env.envs.backends import BackendSettings


@dataclass(frozen=True)
class Sizing:
    """The size of a sandbox whose recipe sets none (a recipe's ``cpus``, ``memory_mb`` and
    ``disk_mb`` win).

    Each vendor takes it in its own units and rounds it to what it sells (whole vCPUs and
    GiB on Daytona, Runloop's sizes); a backend whose sandboxes the vendor sizes
    (agent-sandbox: the cluster's template) ignores it.

    Attributes:
        cpus: CPU cores.
        memory_mb: Memory.
        disk_mb: Disk; ``None`` leaves it to the vendor (E2B, Daytona). Docker's is each
            slot's ``/work`` tmpfs, Deno's the capacity of a build volume; both need one.
    """

    cpus: float = 1.0
    memory_mb: int = 4096
    disk_mb: int | None = None


@dataclass(frozen=True)
class Timeouts:
    """How long each step of a remote sandbox's life may take, so that a slow or unreachable
    service fails with one line instead of hanging the server.

    Attributes:
        connect_s: Each control-plane call at start-up (and, on some backends, a lookup
            later): ``serve`` refuses within seconds when the service does not answer.
        boot_s: A new sandbox and its runner to be ready.
        build_s: One image (snapshot, blueprint, disk image) to build.
        sandbox_s: A sandbox's lifetime, where the vendor ends sandboxes (Modal, E2B,
            OpenSandbox, agent-sandbox) or lets them live only so long (Deno); warm slots
            are retired before it runs out.
    """

    connect_s: float = 10.0
    boot_s: float = 300.0
    build_s: float = 3600.0
    sandbox_s: int = 3600


@dataclass(frozen=True)
class WarmPool:
    """The slots kept ready by a backend whose sandboxes serve episodes in turn
    (``slots.RunnerBackend``): a reset takes an idle slot instead of waiting for a sandbox.

    Attributes:
        warm: Idle slots kept ready per image once the image was used.
        max_episodes: Episodes a slot serves before it is replaced.

    Raises:
        ValueError: ``warm`` below 0 or ``max_episodes`` below 1.
    """

    warm: int = 1
    max_episodes: int = 200

    def __post_init__(self) -> None:
        if self.warm < 0 or self.max_episodes < 1:
            raise ValueError("warm must be >= 0 and max_episodes >= 1")


class Defaults(Protocol):
    """A backend class: its class attributes are its default options, so that they are
    written once and ``options_from_settings`` starts from them."""

    @property
    def sizing(self) -> Sizing: ...

    @property
    def timeouts(self) -> Timeouts: ...


class Options(NamedTuple):
    """A backend's options as ``options_from_settings`` builds them, unpacked where they are
    passed on: not every backend takes all three (E2B keeps no warm pool; agent-sandbox's
    cluster sizes its sandboxes)."""

    sizing: Sizing
    timeouts: Timeouts
    pool: WarmPool


def options_from_settings(
    settings: BackendSettings, backend: Defaults, *, disk: bool = False
) -> Options:
    """``backend``'s default options with what the server's settings set.

    The settings set the cores and memory (``ANALYST_ENV_CPU_LIMIT``,
    ``ANALYST_ENV_MEMORY_LIMIT_MB``), the connect timeout
    (``ANALYST_ENV_BACKEND_CONNECT_TIMEOUT_S``) and the warm slots
    (``ANALYST_ENV_REMOTE_WARM_SLOTS``); the other fields keep ``backend``'s defaults.

    Args:
        settings: The server's settings (``envs.backends.BackendSettings``).
        backend: The backend's class (``DockerSandboxBackend``).
        disk: Whether ``ANALYST_ENV_DISK_LIMIT_MB`` sizes the disk too. It is the episode's
            working space, so it does where the disk is that space (Docker's tmpfs, E2B's
            free disk), not where the disk holds the image as well (Daytona, Deno).

    Example:
        >>> from types import SimpleNamespace
        >>> settings = SimpleNamespace(cpu_limit=2.0, memory_limit_mb=8192, disk_limit_mb=1024,
        ...                            backend_connect_timeout_s=20.0, remote_warm_slots=3)
        >>> backend = SimpleNamespace(sizing=Sizing(), timeouts=Timeouts(boot_s=120.0))
        >>> sizing, timeouts, pool = options_from_settings(settings, backend)
        >>> sizing
        Sizing(cpus=2.0, memory_mb=8192, disk_mb=None)
        >>> timeouts.connect_s, timeouts.boot_s, pool
        (20.0, 120.0, WarmPool(warm=3, max_episodes=200))
    """
    sizing = replace(backend.sizing, cpus=settings.cpu_limit, memory_mb=settings.memory_limit_mb)
    return Options(
        replace(sizing, disk_mb=settings.disk_limit_mb) if disk else sizing,
        replace(backend.timeouts, connect_s=settings.backend_connect_timeout_s),
        WarmPool(warm=settings.remote_warm_slots),
    )
