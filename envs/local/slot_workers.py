"""The local backend's workers: filling kernel orders, refilling and trimming standbys, teardown.

``SlotWorkers`` is the part of ``LocalSandboxBackend`` its worker threads run
(``_maintain``), and the teardown an episode's ``close`` queues for them. It
works on the backend's state (``_lock``, ``_orders``, ``_ready``, ``_teardowns``,
the slots, zygotes and cgroups), which ``LocalSandboxBackend.__init__`` creates.
Orders come first: a reset's episode is waiting for each of them. A baked image no
environment names any more (``forget_image``) loses its standbys here too, and its
zygote once its last episode is torn down.
"""

from __future__ import annotations

import collections
import logging
import threading
from typing import TYPE_CHECKING

from analyst_env.envs.kernel import procctl
from analyst_env.envs.kernel.image_specs import IMAGES
from analyst_env.envs.local.kernel import KernelHandle
from analyst_env.envs.local.kernel_orders import KernelOrder, Placement
from analyst_env.envs.local.slots import KernelSlot, SlotAllocator
from analyst_env.envs.local.standby_pool import StandbyDemand
from analyst_env.envs.sandbox import SandboxError

if TYPE_CHECKING:
    from analyst_env.envs.local.cgroups import CgroupManager
    from analyst_env.envs.local.socket_link import LocalSandbox
    from analyst_env.envs.local.zygotes import Zygotes

log = logging.getLogger("analyst_env.envs.local.backend")


class SlotWorkers:
    """The standby pool (hand out, refill, trim) and teardown, mixed into the backend."""

    # The backend's state these methods work on, declared for the type checker only:
    # ``LocalSandboxBackend.__init__`` creates it (annotations alone set no attribute).
    standbys: int
    max_standbys: int
    _standby_hold_s: float
    _demand: dict[str, StandbyDemand]
    _lock: threading.Condition
    _closed: bool
    _zygotes: Zygotes
    _slots: SlotAllocator
    _cgroups: CgroupManager | None
    _sandboxes: set[LocalSandbox]
    _ready: dict[str, collections.deque[tuple[KernelHandle, KernelSlot, str]]]
    _teardowns: collections.deque[tuple[KernelHandle, KernelSlot]]
    _orders: collections.deque[KernelOrder]
    _orders_open: int
    _spawning: collections.Counter[str]
    _live: collections.Counter[str]
    _forgotten: set[str]

    if TYPE_CHECKING:
        # Defined by ``LocalSandboxBackend``.
        def _spawn(self, image: str, *, warm: bool) -> tuple[KernelHandle, KernelSlot, str]: ...

        def _fill(self, order: KernelOrder) -> Placement: ...

        def _order_done(self, order: KernelOrder) -> None: ...

    def forget_image(self, image: str) -> None:
        """Stop serving a baked image no environment names any more (deleted, or rebuilt as
        another).

        Its standbys are torn down now and its zygote (tens of MiB) stops once its
        last running episode ends; a later ``start`` of the same image boots it
        again. Built-in images are never forgotten.
        """
        if image in IMAGES:
            return
        with self._lock:
            standbys = list(self._ready.pop(image, ()))
            self._forgotten.add(image)
        for kernel, slot, _ in standbys:
            self._discard(kernel, slot)
        self._stop_if_forgotten(image)

    def _stop_if_forgotten(self, image: str) -> None:
        with self._lock:
            busy = (
                self._live[image]
                or self._spawning[image]
                or self._ready.get(image)
                or any(slot.image == image for _, slot in self._teardowns)
            )
            if image not in self._forgotten or busy:
                return
            self._forgotten.discard(image)
        if self._zygotes.stop(image):
            log.info("stopped the zygote of forgotten image %r", image)

    def _kill(self, kernel: KernelHandle, slot: KernelSlot) -> None:
        """Stop the slot's processes now: one ``cgroup.kill`` write, or the tree scan.

        During a burst of resets (which end the previous batch's episodes) the slot is
        frozen instead, and its teardown kills it once the burst is over: the processes
        stop at once either way, but their exits (~4-8 ms of CPU each) no longer compete
        with the resets.
        """
        if self._cgroups is not None and slot.uid is not None and self._cgroups.can_kill():
            if not (self._hold_teardowns() and self._cgroups.freeze(slot.uid)):
                self._cgroups.signal_kill(slot.uid)
            kernel.mark_killed()
        else:
            kernel.kill()

    def _hold_teardowns(self) -> bool:
        """Whether teardowns wait for the burst being served (unless slots run short)."""
        with self._lock:  # re-entrant: also called with it held
            return self._burst_in_progress() and self._slots.in_use < self._slots.capacity * 3 // 4

    def _retire(self, sandbox: LocalSandbox, placement: Placement | None) -> None:
        """A sandbox closed: its last kernel (killed already) is torn down in the background. With
        no placement its order was never filled (the worker filling it tears the kernel down)."""
        with self._lock:
            self._sandboxes.discard(sandbox)
            self._live[sandbox.image] -= 1
            if placement is not None:
                self._teardowns.append((placement.kernel, placement.slot))
            self._lock.notify_all()
        if self._closed:
            self._run_teardowns()

    def _serve_order(self, order: KernelOrder) -> None:
        """Fill one order on this worker; a kernel nobody wants any more is torn down."""
        try:
            if not order.wanted():
                return
            try:
                placement = self._fill(order)
            except Exception as exc:
                log.warning("could not start a kernel for an episode of %r: %s", order.image, exc)
                order.fail(f"the episode's kernel could not be started: {exc}")
                return
            if not order.deliver(placement):
                self._discard(placement.kernel, placement.slot)
        finally:
            with self._lock:
                self._orders_open -= 1
            self._order_done(order)

    def _discard(self, kernel: KernelHandle, slot: KernelSlot) -> None:
        self._kill(kernel, slot)
        with self._lock:
            self._teardowns.append((kernel, slot))
            self._lock.notify_all()

    def _take_slot(self, image: str) -> KernelSlot:
        """A free slot. When none is, ended episodes still waiting for their teardown are torn
        down on this thread until one is: a reset never fails while ended episodes hold slots.

        Raises:
            SandboxError: Every slot is held by a live episode, a standby or a fork.
        """
        while True:
            try:
                return self._slots.take(image)
            except SandboxError:
                with self._lock:
                    job = self._teardowns.popleft() if self._teardowns else None
                if job is None:
                    raise
                self._teardown_logged(*job)

    def _release_slot(self, slot: KernelSlot) -> None:
        """Remove the slot's directory (if its zygote still has it) and free its uid."""
        self._zygotes.release(slot)
        self._slots.give_back(slot)

    def _teardown(self, kernel: KernelHandle, slot: KernelSlot) -> None:
        if self._cgroups is not None and slot.uid is not None and self._cgroups.available():
            if not self._cgroups.kill(slot.uid, timeout_s=5.0):
                procctl.kill_uid(slot.uid)
                if not self._cgroups.kill(slot.uid, timeout_s=5.0):
                    log.error("slot %s still has processes; its uid is not reused", slot.name)
                    kernel.release()
                    return
        elif slot.uid is not None:
            procctl.kill_uid(slot.uid)
        kernel.release()
        self._release_slot(slot)

    def _stop_slot(self, placement: Placement) -> None:
        """Before verification: kill every process of the episode and make sure none runs on.

        With v2 ``cgroup.kill`` every process in the slot's cgroup dies and the slot is
        watched until empty; with a uid of its own (no ``cgroup.kill``, or a cgroup that
        would not empty) every process of that uid is stopped and killed, re-scanning until no
        new one appears: a SIGKILLed process never runs user code again, and the verify
        directory it would need to find does not exist yet. Without either (``userns``,
        ``landlock`` without root, ``none``) the kernel's process tree is killed: the kernel
        is a child subreaper (locked on: ``subreaper_lock``), so a detached or double-forked
        process is still in that tree.
        """
        kernel, slot = placement.kernel, placement.slot
        if self._cgroups is not None and slot.uid is not None and self._cgroups.can_kill():
            if self._cgroups.kill(slot.uid, timeout_s=5.0):
                kernel.mark_killed()
                return
        kernel.kill()
        if slot.uid is not None:
            procctl.kill_uid(slot.uid)

    def _run_teardowns(self) -> None:
        while True:
            with self._lock:
                if not self._teardowns:
                    return
                job = self._teardowns.popleft()
            self._teardown_logged(*job)

    def _teardown_logged(self, kernel: KernelHandle, slot: KernelSlot) -> None:
        try:
            self._teardown(kernel, slot)
        except Exception:
            log.exception("tearing down slot %s failed", slot.name)
        if slot.image in self._forgotten:
            self._stop_if_forgotten(slot.image)

    def _wanted_image(self) -> str | None:
        """An image whose pool is below its target, unless a burst of resets is being served."""
        if self._slots.in_use >= self._slots.capacity or self._burst_in_progress():
            return None
        for image, ready in self._ready.items():
            if len(ready) + self._spawning[image] < self._demand_of(image).target():
                return image
        return None

    def _teardown_due(self) -> bool:
        return bool(self._teardowns) and not self._hold_teardowns()

    def _recheck_after(self) -> float | None:
        if self._burst_in_progress():
            return 0.25
        if any(len(ready) > self.standbys for ready in self._ready.values()):
            return 1.0
        return None

    def _burst_in_progress(self) -> bool:
        return any(demand.burst_in_progress() for demand in self._demand.values())

    def _surplus_standby(self) -> tuple[KernelHandle, KernelSlot] | None:
        """A standby beyond its pool's target (a burst's size is forgotten after a while)."""
        for image, ready in self._ready.items():
            if len(ready) > self._demand_of(image).target():
                kernel, slot, _ = ready.pop()
                return kernel, slot
        return None

    def _maintain(self, refill_first: bool) -> None:
        """Background worker: fill orders, refill standbys and tear down ended episodes, one job
        at a time.

        Orders come first on every worker. Otherwise half the workers prefer refilling,
        the others tearing down, so a burst of resets gets kernels while a wave of ended
        episodes (say 1,000 closed at once) is still being cleaned up, and neither
        queue starves.
        """
        while True:
            with self._lock:
                while (
                    not self._closed
                    and not self._orders
                    and not self._teardown_due()
                    and self._wanted_image() is None
                ):
                    surplus = self._surplus_standby()
                    if surplus is not None:
                        self._discard(*surplus)  # queued as a teardown: the loop takes it next
                        break
                    # Timed while a burst holds refilling back (its end is a lull, not an
                    # event), and while a pool is above its floor (its burst expires unseen).
                    self._lock.wait(timeout=self._recheck_after())
                if self._closed:
                    return
                order = self._orders.popleft() if self._orders else None
                image, job = None, None
                if order is None:
                    image = self._wanted_image()
                    if image is not None and (refill_first or not self._teardown_due()):
                        self._spawning[image] += 1
                    else:
                        image, job = None, self._teardowns.popleft()
            if order is not None:
                self._serve_order(order)
                continue
            if job is not None:
                self._teardown_logged(*job)
                continue
            assert image is not None  # no teardown job: the block above chose an image to refill
            try:
                standby = self._spawn(image, warm=True)
            except Exception as exc:
                # A backend closing under a refill (a Gymnasium env closed right after its
                # reset) fails the spawn by design: nothing to warn about.
                if not self._closed:
                    log.warning("could not prepare a standby kernel for %r: %s", image, exc)
                with self._lock:
                    self._spawning[image] -= 1
                    self._lock.wait(timeout=1.0)  # do not spin on a broken zygote
                continue
            with self._lock:
                self._spawning[image] -= 1
                if self._closed or image not in self._ready:  # closed, or the image was forgotten
                    self._teardowns.append(standby[:2])
                    self._lock.notify_all()
                else:
                    self._ready[image].append(standby)

    def _discard_orphaned_standbys(self, image: str) -> None:
        """Tear down the ready standbys of ``image`` whose zygote is gone (their kernels died with
        it)."""
        live = self._zygotes.live(image)  # one liveness check, not one per standby
        with self._lock:
            ready = self._ready.get(image)
            if not ready:
                return
            orphaned = [s for s in ready if s[1].zygote is None or s[1].zygote not in live]
            for standby in orphaned:
                ready.remove(standby)
        for kernel, slot, _ in orphaned:
            self._discard(kernel, slot)

    def _demand_of(self, image: str) -> StandbyDemand:
        """``image``'s pool sizing (call with ``_lock`` held)."""
        demand = self._demand.get(image)
        if demand is None:
            demand = StandbyDemand(self.standbys, self.max_standbys, self._standby_hold_s)
            self._demand[image] = demand
        return demand

    def _take_standby(self, image: str) -> tuple[KernelHandle, KernelSlot, str] | None:
        self._discard_orphaned_standbys(image)  # a killed zygote's standbys died with it
        with self._lock:
            ready = self._ready.setdefault(image, collections.deque())
            taken = ready.popleft() if ready else None
            self._lock.notify_all()
        return taken
