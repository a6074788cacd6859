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
    from analyst_env.paths import cache_root

    sizing = Sizing(
        memory_mb=settings.memory_limit_mb,
        cpus=settings.cpu_limit,
        pids=settings.pids_limit,
        disk_mb=settings.disk_limit_mb,
    )
    return LocalSandboxBackend(
        sizing=sizing,
        isolation=settings.isolation,
        standbys=settings.standbys,
        uid_base=settings.uid_base,
        hidden_paths=(str(cache_root()), str(settings.state_dir)),
    )


def _images_dir(settings: Settings):
    """Where the sandbox environments record their builds (``<state_dir>/envs/images``)."""
    from pathlib import Path

    return Path(settings.state_dir) / "envs" / "images"


def _docker(settings: Settings) -> SandboxBackend:
    """Docker engine from ``DOCKER_HOST`` (or the default socket)."""
    import os

    from analyst_env.envs.remote.docker_backend import DockerSandboxBackend
    from analyst_env.envs.remote.images import recipe_resolver

    return DockerSandboxBackend(
        recipe_resolver(_images_dir(settings), "docker"),
        base_url=os.environ.get("DOCKER_HOST") or None,
        runtime=settings.docker_runtime,
        cpus=settings.cpu_limit,
        memory_mb=settings.memory_limit_mb,
        disk_mb=settings.disk_limit_mb,
        pids=settings.pids_limit,
        connect_timeout_s=settings.backend_connect_timeout_s,
        warm=settings.remote_warm_slots,
    )


def _modal(settings: Settings) -> SandboxBackend:
    """Modal credentials from ``MODAL_TOKEN_ID`` and ``MODAL_TOKEN_SECRET``."""
    import os

    from analyst_env.envs.remote.images import recipe_resolver
    from analyst_env.envs.remote.modal_backend import ModalSandboxBackend

    return ModalSandboxBackend(
        recipe_resolver(_images_dir(settings), "modal"),
        token_id=os.environ.get("MODAL_TOKEN_ID"),
        token_secret=os.environ.get("MODAL_TOKEN_SECRET"),
        app_name=settings.modal_app,
        cpus=settings.cpu_limit,
        memory_mb=settings.memory_limit_mb,
        connect_timeout_s=settings.backend_connect_timeout_s,
        warm=settings.remote_warm_slots,
    )


def _e2b(settings: Settings) -> SandboxBackend:
    """E2B credentials from ``E2B_API_KEY`` (and ``E2B_DOMAIN`` when self-hosted)."""
    import os

    from analyst_env.envs.remote.e2b_backend import E2BSandboxBackend
    from analyst_env.envs.remote.images import recipe_resolver

    return E2BSandboxBackend(
        recipe_resolver(_images_dir(settings), "e2b"),
        api_key=os.environ.get("E2B_API_KEY"),
        domain=os.environ.get("E2B_DOMAIN") or None,
        template=settings.e2b_template,
        cpus=settings.cpu_limit,
        memory_mb=settings.memory_limit_mb,
        disk_mb=settings.disk_limit_mb,
        connect_timeout_s=settings.backend_connect_timeout_s,
    )


BACKENDS: dict[str, Callable[[Settings], SandboxBackend]] = {
    "local": _local,
    "docker": _docker,
    "modal": _modal,
    "e2b": _e2b,
}


def make_backend(settings: Settings) -> SandboxBackend:
    """The backend named by ``settings.backend``.

    Raises:
        ValueError: No backend has that name.
        SandboxError: The backend cannot be used (``BackendUnavailable``: its SDK
            or credentials are missing, or its service did not answer in time).
    """
    try:
        factory = BACKENDS[settings.backend]
    except KeyError:
        raise ValueError(
            f"unknown sandbox backend {settings.backend!r}; available: {sorted(BACKENDS)}"
        ) from None
    return factory(settings)
