"""How the local backend gets an episode its kernel: an order, a standby or a fork.

``KernelSupply`` is the part of ``LocalSandboxBackend`` that starts sandboxes and
makes kernels. ``_start`` places a kernel order (``kernel_orders``) when the image's
zygote runs, and fills one on the caller's thread otherwise (the zygote must boot
first, so an image that cannot start fails the reset itself). ``_fill`` is the one
way an order is filled, by a worker or by that caller: a ready standby or a new fork
(``_spawn``: a slot, its cgroups, the zygote's fork), activated with the task files,
seed and environment. ``_respawn`` forks a replacement kernel into a live slot.
It works on the backend's state, which ``LocalSandboxBackend.__init__`` creates.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from analyst_env.envs.frame_socket import ConnectionClosed
from analyst_env.envs.kernel.image_specs import IMAGES, ImageSpec
from analyst_env.envs.local.activation import activate, open_task_files, request
from analyst_env.envs.local.cgroups import CgroupManager
from analyst_env.envs.local.isolation import Sizing
from analyst_env.envs.local.kernel import KernelHandle
from analyst_env.envs.local.kernel_orders import KernelOrder, Placement
from analyst_env.envs.local.slots import KernelSlot
from analyst_env.envs.local.socket_link import LocalSandbox
from analyst_env.envs.local.standby_pool import StandbyDemand
from analyst_env.envs.local.zygotes import Zygotes
from analyst_env.envs.sandbox import SandboxError

_WARM_TIMEOUT_S = 60.0


class KernelSupply:
    """Starting sandboxes and making their kernels, mixed into the backend."""

    # The backend's state these methods work on, declared for the type checker only.
    sizing: Sizing
    output_limit_bytes: int
    interrupt_grace_s: float
    boot_timeout_s: float
    image_resolver: Callable[[str], ImageSpec | None] | None
    _closed: bool
    _lock: threading.Condition
    _zygotes: Zygotes
    _cgroups: CgroupManager | None
    _orders: collections.deque[KernelOrder]
    _orders_open: int
    _sandboxes: set[LocalSandbox]
    _live: collections.Counter[str]
    _forgotten: set[str]

    if TYPE_CHECKING:
        # Defined by ``SlotWorkers``.
        def _demand_of(self, image: str) -> StandbyDemand: ...

        def _take_slot(self, image: str) -> KernelSlot: ...

        def _release_slot(self, slot: KernelSlot) -> None: ...

        def _take_standby(self, image: str) -> tuple[KernelHandle, KernelSlot, str] | None: ...

        def _discard(self, kernel: KernelHandle, slot: KernelSlot) -> None: ...

        def _discard_orphaned_standbys(self, image: str) -> None: ...

        def _kill(self, kernel: KernelHandle, slot: KernelSlot) -> None: ...

        def _retire(self, sandbox: LocalSandbox, placement: Placement | None) -> None: ...

        def _stop_slot(self, placement: Placement) -> None: ...

    def _start(
        self,
        image: str,
        files: dict[str, str],
        seed: int | None,
        env: dict[str, str] | None,
        *,
        may_block: bool,
    ) -> LocalSandbox | None:
        if self._closed:
            raise SandboxError("the backend is closed")
        self._check_image(image)
        order = KernelOrder(image, dict(files), open_task_files(files), seed, dict(env or {}))
        with self._lock:
            queued = not self._closed and self._zygotes.serving(image)
            if queued or may_block:
                self._demand_of(image).began()
            if queued and self._demand_of(image).burst_in_progress():
                # Forks of a burst go to as many zygotes as there are cores (``zygotes``).
                self._zygotes.grow(image)
            if queued:
                self._orders.append(order)
                self._orders_open += 1
                self._lock.notify_all()
        if not queued:
            if not may_block:
                order.release_files()
                return None
            try:
                order.deliver(self._fill(order))
            finally:
                self._order_done(order)
        sandbox = LocalSandbox(
            order,
            respawn=lambda placement: self._respawn(placement, order),
            kill=lambda placement: self._kill(placement.kernel, placement.slot),
            stop_all=self._stop_slot,
            on_close=self._retire,
            interrupt_grace_s=self.interrupt_grace_s,
            start_timeout_s=self.boot_timeout_s,
        )
        with self._lock:
            self._sandboxes.add(sandbox)
            self._live[image] += 1
            self._forgotten.discard(image)
        return sandbox

    # ── kernels ─────────────────────────────────────────────────────────────
    def _check_image(self, image: str) -> ImageSpec:
        spec = IMAGES.get(image) or (self.image_resolver(image) if self.image_resolver else None)
        if spec is None:
            raise SandboxError(f"unknown image {image!r}; the local backend has {sorted(IMAGES)}")
        return spec

    def _sizing(self, image: str) -> Sizing:
        """The backend's sizing, with the resources an image sets (a recipe's) in place."""
        spec = self._check_image(image)
        own = {
            k: getattr(spec, k)
            for k in ("memory_mb", "cpus", "disk_mb")
            if getattr(spec, k) is not None
        }
        return dataclasses.replace(self.sizing, **own) if own else self.sizing

    def _fork(self, slot: KernelSlot, *, fresh: bool) -> tuple[KernelHandle, str]:
        if self._closed:
            raise SandboxError("the backend is closed")
        fork_request = {
            "op": "fork",
            "slot": slot.name,
            "uid": slot.uid,
            "fresh": fresh,
            "sizing": self._sizing(slot.image).to_json(),
            "output_limit_bytes": self.output_limit_bytes,
        }
        kernel, workdir = self._zygotes.fork(slot, fork_request)
        if self._cgroups is not None and slot.uid is not None and self._cgroups.available():
            try:
                self._cgroups.add(slot.uid, kernel.pid)
            except OSError as exc:
                kernel.release()
                raise SandboxError(f"could not move the kernel into its cgroups: {exc}") from exc
        return kernel, workdir

    def _spawn(self, image: str, *, warm: bool) -> tuple[KernelHandle, KernelSlot, str]:
        """Fork a kernel in a new slot (cgroups prepared), optionally warmed up."""
        slot = self._take_slot(image)
        try:
            if self._cgroups is not None and slot.uid is not None and self._cgroups.available():
                s = self._sizing(image)
                self._cgroups.prepare(slot.uid, s.memory_mb, s.cpus, s.pids)
            kernel, workdir = self._fork(slot, fresh=True)
        except BaseException:
            self._release_slot(slot)
            raise
        if warm:
            try:
                request(
                    kernel,
                    {"op": "warm", "code": self._check_image(image).standby_warm_up},
                    _WARM_TIMEOUT_S,
                )
            except BaseException:
                self._discard(kernel, slot)
                raise
        return kernel, slot, workdir

    def _fill(self, order: KernelOrder) -> Placement:
        """A kernel for ``order``: a ready standby or a new fork, activated with the order's
        files, seed and environment.

        Raises:
            SandboxError: No kernel could be started or activated.
        """
        for _ in range(3):
            kernel, slot, workdir = self._take_standby(order.image) or self._spawn(
                order.image, warm=False
            )
            try:
                activate(kernel, order.files, order.fds, order.seed, order.env)
                return Placement(kernel, slot, workdir)
            except ConnectionClosed:
                # The kernel died (e.g. its zygote was killed); tear it down, and every other
                # standby of a dead zygote with it, then try again.
                self._discard(kernel, slot)
                self._discard_orphaned_standbys(order.image)
            except BaseException:
                self._discard(kernel, slot)
                raise
        raise SandboxError("could not start a kernel: every attempt died")

    def _order_done(self, order: KernelOrder) -> None:
        """An order was filled, failed or dropped: its files are closed, its reset has ended."""
        order.release_files()
        with self._lock:
            self._demand_of(order.image).ended()
            self._lock.notify_all()  # a burst may be over: refilling can resume

    def _respawn(self, placement: Placement, order: KernelOrder) -> KernelHandle:
        """A fresh kernel in ``placement``'s slot, with the episode's seed and environment."""
        fresh, _ = self._fork(placement.slot, fresh=False)
        activate(fresh, {}, [], order.seed, order.env)
        return fresh
