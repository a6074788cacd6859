"""Choose a sandbox backend by name.

A dict of lazy constructors: a backend's vendor SDK is imported only when that
backend is asked for, so the server starts without Modal, E2B or Docker installed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from analyst_env.envs.sandbox import SandboxBackend

if TYPE_CHECKING:
    from analyst_env.server.settings import Settings


def _local(settings: Settings) -> SandboxBackend:
    from analyst_env.envs.local import LocalSandboxBackend
    from analyst_env.envs.local.isolation import Sizing

    sizing = Sizing(
        memory_mb=settings.memory_limit_mb,
        cpus=settings.cpu_limit,
        pids=settings.pids_limit,
        disk_mb=settings.disk_limit_mb,
    )
    return LocalSandboxBackend(sizing=sizing, isolation=settings.isolation, standbys=settings.standbys)


BACKENDS: dict[str, Callable[[Settings], SandboxBackend]] = {"local": _local}


def make_backend(settings: Settings) -> SandboxBackend:
    """The backend named by ``settings.backend``.

    Raises:
        ValueError: No backend has that name.
    """
    try:
        factory = BACKENDS[settings.backend]
    except KeyError:
        raise ValueError(
            f"unknown sandbox backend {settings.backend!r}; available: {sorted(BACKENDS)}"
        ) from None
    return factory(settings)
