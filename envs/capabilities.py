"""What a sandbox backend declares it can do, and the optional parts only some backends have.

Every backend implements ``SandboxBackend`` (``envs/sandbox.py``: start a sandbox, close) and
declares a ``BackendCapabilities``: facts about its
sandboxes that callers read instead of probing (does a variable survive the next cell,
can a cell be interrupted, is there a network). The rest is optional: a backend has
a part below only if it implements that protocol, and callers ask for it by capability
(``isinstance(backend, KeepsStandbys)``, or ``warm_up``/``protections_of`` below), so a new
backend (a thin link to a vendor's API) writes none of them as no-ops.

| protocol | who has it |
|---|---|
| ``WarmsUp`` | local (boots a zygote), slot-runner backends (find or build an image, warm slots) |
| ``ReportsProtections`` | local (isolation mode, limits, what start-up verified) |
| ``StartsWithoutWaiting`` | local (orders a kernel once the zygote runs) |
| ``KeepsStandbys`` | local (pre-forked standbys and kernel orders, for ``/metrics``) |
| ``ServesBakedPackages`` | local (a baked recipe is a package directory its zygote imports) |
| ``BakesArtifacts`` | Docker, Modal, E2B (an image or template per recipe) |
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from analyst_env.envs.kernel.image_specs import ImageSpec
    from analyst_env.envs.sandbox import Sandbox, SandboxBaker


@dataclass(frozen=True)
class BackendCapabilities:
    """Facts about a backend's sandboxes, declared by the backend (``SandboxBackend.capabilities``).

    Attributes:
        kernel: ``persistent``: variables survive from one cell to the next (every backend
            today); ``rerun``: each cell starts a fresh interpreter.
        interrupt: A cell over its limit can be interrupted and the kernel kept; without it,
            the kernel is replaced (variables lost, files kept).
        file_transfer: ``put_file``/``get_file`` move bytes in and out of the working directory.
        per_sandbox_limits: Memory, CPU and pids are limited per sandbox (not only per host).
        network: What a cell can reach: ``none`` (no network, or no TCP), ``loopback`` (its
            own namespace's loopback only), ``host`` (what the host reaches: the local
            backend under isolation ``none``).
        pause_resume: A sandbox can be paused and resumed with its processes (no backend yet).
        warm_pool: Sandboxes (or kernels) are started ahead of time, so ``start`` is fast.
        verify_commands: ``stop_agent_processes`` and ``run_verifier`` work, so tasks scored
            by shell ``verify`` commands can run on it.
    """

    kernel: Literal["persistent", "rerun"] = "persistent"
    interrupt: bool = True
    file_transfer: bool = True
    per_sandbox_limits: bool = True
    network: Literal["none", "loopback", "host"] = "none"
    pause_resume: bool = False
    warm_pool: bool = False
    verify_commands: bool = False


@runtime_checkable
class WarmsUp(Protocol):
    """A backend with something to prepare before its first ``start`` (a zygote, an image, warm
    slots). The server warms it once at start-up and refuses to serve if that fails."""

    def warm_up(self, image: str = "default") -> None:
        """Prepare ``image`` now so the first ``start`` is fast.

        Raises:
            SandboxError: The image cannot be served.
        """
        ...


@runtime_checkable
class ReportsProtections(Protocol):
    """A backend that enforces protections itself and reports which ones its episodes get."""

    def protections(self) -> dict[str, bool | str]:
        """The protections in force (``isolation``, ``limits``, ``degraded``, ``verified``,
        ``unconfined`` ...), as ``GET /sandbox`` and ``/metadata`` show them."""
        ...


def warm_up(backend: object, image: str = "default") -> None:
    """Warm ``backend`` up for ``image`` if it has anything to prepare (``WarmsUp``)."""
    if isinstance(backend, WarmsUp):
        backend.warm_up(image)


def protections_of(backend: object) -> dict[str, bool | str]:
    """What ``backend`` reports of its protections; ``{}`` for one that reports none.

    ``{}`` claims nothing: no ``isolation`` is shown and nothing counts as verified, so a
    backend whose vendor owns isolation is never read as more protected than it is. What
    must run confined asks ``reports_confinement`` instead of reading an empty report as safe.
    """
    return backend.protections() if isinstance(backend, ReportsProtections) else {}


def reports_confinement(backend: object) -> bool:
    """Whether ``backend`` reports protections and they do not say ``unconfined`` (fail closed:
    a backend that reports nothing is not taken as confining anything)."""
    return isinstance(backend, ReportsProtections) and not backend.protections().get("unconfined")


@runtime_checkable
class StartsWithoutWaiting(Protocol):
    """A backend that can often start a sandbox with no waiting at all.

    The server calls ``start_nowait`` on its event loop's thread, and ``start`` on a worker
    thread when it returns None (or when the backend has no such part).
    """

    def start_nowait(
        self,
        image: str,
        *,
        files: dict[str, str],
        seed: int | None = None,
        env: dict[str, str] | None = None,
    ) -> Sandbox | None:
        """``start``, if it can be done without waiting (no network call, no boot); else None.

        Raises:
            SandboxError: As ``start`` does, for what it could check without waiting.
        """
        ...


@runtime_checkable
class KeepsStandbys(Protocol):
    """A backend with sandboxes started ahead of time, and ones whose kernel is still coming
    (``/metrics`` shows both)."""

    def standby_count(self) -> int:
        """Sandboxes started ahead of time and ready to hand out now."""
        ...

    def kernels_on_order(self) -> int:
        """Sandboxes ``start`` returned whose kernel is not ready yet."""
        ...


@runtime_checkable
class ServesBakedPackages(Protocol):
    """A backend that runs a baked recipe as a locally built package directory (the local
    backend's zygote imports it); the recipe service tells it where each one is."""

    def use_image_resolver(self, resolve: Callable[[str], ImageSpec | None]) -> None:
        """Use ``resolve`` to map a baked image name to its package directory."""
        ...

    def forget_image(self, image: str) -> None:
        """Stop serving a baked image no environment names any more."""
        ...


@runtime_checkable
class BakesArtifacts(Protocol):
    """A backend that builds its own artifact (an image, a template) for each recipe."""

    def baker(self) -> SandboxBaker:
        """The builder of this backend's artifacts."""
        ...
