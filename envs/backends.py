"""Choose a sandbox backend by name.

``BACKENDS`` maps each name to a lazy ``"module:function"`` entry point (as
Gymnasium registers environments): a backend's module, and with it its vendor
SDK, is imported only when that backend is asked for, so the server starts
without Modal, E2B or Docker installed. ``BACKEND_REGISTRY`` adds the backends of
installed plugins (``entry_points.Registry``: the one way parts are registered). Each
entry point takes the settings described by ``BackendSettings``; the server's
``Settings`` is one, but this package does not depend on the server.
"""

from __future__ import annotations

from typing import Protocol

from analyst_env.entry_points import Registry
from analyst_env.envs.sandbox import SandboxBackend

BACKENDS: dict[str, str] = {
    "local": "analyst_env.envs.local.backend:from_settings",
    "docker": "analyst_env.envs.remote.docker_backend:from_settings",
    "modal": "analyst_env.envs.remote.modal_backend:from_settings",
    "e2b": "analyst_env.envs.remote.e2b_backend:from_settings",
    "daytona": "analyst_env.envs.remote.daytona_backend:from_settings",
    "agent-sandbox": "analyst_env.envs.remote.agent_sandbox_backend:from_settings",
    "opensandbox": "analyst_env.envs.remote.opensandbox_backend:from_settings",
    "runloop": "analyst_env.envs.remote.runloop_backend:from_settings",
    "azure": "analyst_env.envs.remote.azure_backend:from_settings",
    "deno": "analyst_env.envs.remote.deno_backend:from_settings",
    "prime": "analyst_env.envs.remote.prime_backend:from_settings",
    "coreweave": "analyst_env.envs.remote.coreweave_backend:from_settings",
}
"""The package's backends. Another package adds its own under the entry-point group
``analyst_env.backends`` (docs/backends.md, "Adding a backend")."""

BACKEND_REGISTRY = Registry("sandbox backend", BACKENDS, "analyst_env.backends")


class BackendSettings(Protocol):
    """What the backends' entry points read (units in the names)."""

    backend: str
    state_dir: str
    memory_limit_mb: int
    cpu_limit: float
    pids_limit: int
    disk_limit_mb: int
    isolation: str
    max_sessions: int
    standbys: int
    max_standbys: int | None
    uid_base: int | None
    docker_runtime: str | None
    modal_app: str
    e2b_template: str | None
    backend_connect_timeout_s: float
    remote_warm_slots: int
    agent_sandbox_namespace: str | None
    agent_sandbox_warm_pool: str
    opensandbox_image: str | None
    opensandbox_egress: str
    coreweave_image: str | None
    coreweave_image_repository: str | None


def make_backend(settings: BackendSettings) -> SandboxBackend:
    """The backend named by ``settings.backend``.

    Raises:
        ValueError: No backend has that name.
        SandboxError: The backend cannot be used (``BackendUnavailable``: its SDK
            or credentials are missing, or its service did not answer in time).
    """
    try:
        from_settings = BACKEND_REGISTRY[settings.backend]
    except KeyError:
        raise ValueError(BACKEND_REGISTRY.unknown(settings.backend)) from None
    return from_settings(settings)
