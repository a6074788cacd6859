"""``LocalSandboxBackend``: the embedded, Docker-free sandbox backend.

Each image gets a warm zygote process (one per core once a burst of resets came,
``zygotes``), confined in a private root view (see ``rootview``/``isolation``). Kernels
are forked from it *ahead of time*: background threads keep ``standbys`` kernels per
image already forked, isolated (own namespaces, per-slot uid, rlimits, seccomp), moved
into their slot's cgroups and warmed up. ``start()`` does not wait for any of it: it
places an order (``kernel_orders``) and returns, and a worker hands out a standby (or
forks a kernel when none is ready) and passes it the task files (as file descriptors,
copied into its tmpfs), the seed and the environment, about a millisecond plus the copy,
while the episode's first turn is written; the first call waits for it if need be.
``close()`` kills the episode's whole tree with one ``cgroup.kill`` write; waiting for
it to die, unmounting the slot and returning its uid to the pool happen on the same
background thread.

``protections()`` reports which protections are active; ``isolation="auto"``
picks the strongest mode the process can use (see ``isolation``). Linux only.

Its parts: ``zygotes`` (one per image, one per core once a burst came), ``slots``
(directories and uids), ``kernel_supply`` with ``kernel_orders`` and ``activation``
(starting a sandbox: an order, a standby or a fork, and the task files into the kernel),
``slot_workers`` with ``standby_pool`` (orders, standbys and teardown, on the
background threads) and ``protection_report`` (with the declared ``capabilities``).
Beyond ``SandboxBackend`` it has the optional parts of ``envs.capabilities`` that only
a fork server has: ``start_nowait`` (``StartsWithoutWaiting``), ``standby_count`` and
``kernels_on_order`` (``KeepsStandbys``), ``use_image_resolver`` and ``forget_image``
(``ServesBakedPackages``).
"""

from __future__ import annotations

import collections
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from analyst_env.envs.kernel import procctl
from analyst_env.envs.kernel.capture import DEFAULT_LIMIT_BYTES
from analyst_env.envs.kernel.image_specs import ImageSpec
from analyst_env.envs.local import uid_ranges
from analyst_env.envs.local.cgroups import CgroupManager
from analyst_env.envs.local.fail_closed import (
    Refusal,
    check_facts,
    check_limits,
    per_process_accepted,
)
from analyst_env.envs.local.isolation import Sizing, choose_mode, protections, uses_slot_uids
from analyst_env.envs.local.kernel import KernelHandle
from analyst_env.envs.local.kernel_orders import KernelOrder
from analyst_env.envs.local.kernel_supply import KernelSupply
from analyst_env.envs.local.protection_report import (
    declared_capabilities,
    degradation,
    protection_report,
)
from analyst_env.envs.local.rootview import hidden_interpreter_paths
from analyst_env.envs.local.slot_workers import SlotWorkers
from analyst_env.envs.local.slots import KernelSlot, SlotAllocator
from analyst_env.envs.local.socket_link import LocalSandbox
from analyst_env.envs.local.standby_pool import HOLD_S, StandbyDemand
from analyst_env.envs.local.zygotes import Zygotes
from analyst_env.envs.sandbox import SandboxBackend
from analyst_env.paths import cache_root

if TYPE_CHECKING:
    from analyst_env.envs.backends import BackendSettings

log = logging.getLogger(__name__)
_WORKERS_PER_ZYGOTE = 2


class LocalSandboxBackend(KernelSupply, SlotWorkers, SandboxBackend):
    """Starts sandboxes as isolated kernels forked from a per-image zygote.

    Args:
        root_dir: Directory for the backend's scratch files (the zygotes' root
            views; the slots themselves in mode ``none``); a private temporary
            directory (removed by ``close``) if ``None``.
        memory_limit_mb: Memory of each episode; shorthand for ``sizing.memory_mb``.
        sizing: Per-episode resources (memory, cpus, pids, disk); overrides
            ``memory_limit_mb`` when given.
        isolation: ``auto``, ``full``, ``userns`` or ``none`` (see ``isolation``).
        standbys: Kernels kept forked and ready per image however quiet it is (0
            disables standbys).
        max_standbys: Kernels kept ready per image at most: the pool grows to the
            largest burst of resets seen in the last ten minutes, up to this
            (``standby_pool``). ``None``: ``standbys`` (a fixed pool).
        standby_hold_s: How long a burst's size keeps the pool that large.
        uid_base: First per-slot uid (``full`` mode); slots use
            ``uid_base .. uid_base + max_slots - 1``. ``None`` claims the first
            range no other server on the host holds (``uid_ranges``); a given
            base is claimed too, and refused if another server holds it.
        max_slots: Live slots at most (episodes plus standbys plus ones being torn down).
        output_limit_bytes: Bytes of stdout and of stderr kept per cell or
            command; the rest is dropped with a note.
        interrupt_grace_s: How long an interrupted cell may take to stop before
            its kernel is replaced.
        boot_timeout_s: How long a zygote may take to import and warm its image.
        hidden_paths: Host directories kernels must never read, also where the
            private root exposes their parent (the server's package is always
            hidden; the task cache by default too).
        per_process_limits: Accept per-process memory and pids limits where per-episode
            cgroups cannot be verified (``fail_closed.check_limits``). ``None``: as
            ``ANALYST_ENV_PER_PROCESS_LIMITS`` says (so builds' import checks and every
            worker follow the server's choice).
        zygotes_per_image: Zygotes forking an image's kernels at once at most; the
            first boots on first use, the others on the first burst of resets
            (``zygotes``). ``None``: one per core.

    Raises:
        ValueError: Invalid mode or sizing, or the server's Python lives where the
            private root cannot show it (under ``/tmp``).
        fail_closed.Refusal: A claimed protection or limit could not be verified here
            (the fail-closed rule; its message is the one line ``serve`` prints).
    """

    name = "local"

    def __init__(
        self,
        root_dir: str | None = None,
        *,
        memory_limit_mb: int = 4096,
        sizing: Sizing | None = None,
        isolation: str = "auto",
        standbys: int = 4,
        max_standbys: int | None = None,
        standby_hold_s: float = HOLD_S,
        uid_base: int | None = None,
        max_slots: int = 1024,
        output_limit_bytes: int = DEFAULT_LIMIT_BYTES,
        interrupt_grace_s: float = 2.0,
        boot_timeout_s: float = 120.0,
        hidden_paths: tuple[str, ...] | None = None,
        per_process_limits: bool | None = None,
        zygotes_per_image: int | None = None,
    ) -> None:
        if standbys < 0 or (max_standbys or 0) < 0 or max_slots < 1:
            raise ValueError("standbys and max_standbys must be >= 0 and max_slots >= 1")
        self.mode, self.isolation_report = choose_mode(isolation)
        log.info(
            "local sandbox isolation: %s%s",
            self.mode,
            "".join(
                f"; {m} unavailable ({why})" for m, why in self.isolation_report["tried"].items()
            ),
        )
        hidden = hidden_interpreter_paths() if self.mode != "none" else []
        if self.mode in ("landlock", "none"):
            # Episodes share this process's uid: they must not read its memory or environment.
            procctl.set_dumpable(False)
        if hidden:
            raise ValueError(
                f"the server's Python lives under {', '.join(hidden)}, which the sandbox's "
                "private root replaces with its own (/tmp is per episode): kernels could not "
                "import their modules. "
                "Install analyst_env outside /tmp, or run with isolation 'none'"
            )
        self.sizing = sizing or Sizing(memory_mb=memory_limit_mb)
        # Claimed first: a refused range must fail before anything is created.
        slot_uids = uses_slot_uids(self.mode)
        self._uid_range = uid_ranges.claim(max_slots, uid_base) if slot_uids else None
        self._cgroups = (
            CgroupManager(f"analyst-env-{os.getpid()}-{id(self):x}") if slot_uids else None
        )
        try:  # the fail-closed rule: what is claimed was verified, or nothing starts
            if self._cgroups is not None:
                self._cgroups.verify(self.sizing.memory_mb, self.sizing.cpus, self.sizing.pids)
            check_facts(self.mode, protections(self.mode), self.isolation_report["facts"])
            self.limits = check_limits(
                self.mode,
                self._cgroups.failure if self._cgroups is not None else None,
                self._cgroups is not None and self._cgroups.limits_everything(),
                slot_uids,
                per_process_accepted() if per_process_limits is None else per_process_limits,
            )
        except Refusal:
            if self._cgroups is not None:
                self._cgroups.close()
            if self._uid_range is not None:
                self._uid_range.release()
            raise
        if degradation(self._cgroups):
            log.warning("local sandbox runs degraded: %s", degradation(self._cgroups))
        self.capabilities = declared_capabilities(self.mode, self._cgroups)
        self.standbys = standbys
        self.max_standbys = max(standbys, max_standbys if max_standbys is not None else standbys)
        self._standby_hold_s = standby_hold_s
        self._owns_root = root_dir is None
        if root_dir is None:
            root_dir = tempfile.mkdtemp(prefix="analyst-env-local-")
        else:
            os.makedirs(root_dir, exist_ok=True)
        self.root_dir = os.path.realpath(root_dir)
        self.output_limit_bytes = output_limit_bytes
        self.interrupt_grace_s = interrupt_grace_s
        self.boot_timeout_s = boot_timeout_s
        self.hidden_paths = tuple(
            str(p) for p in (hidden_paths if hidden_paths is not None else (cache_root(),))
        )
        for path in self.hidden_paths:
            # Made now: a directory created after the zygote built its view (the task cache
            # on the first reset) would not be covered there.
            try:
                os.makedirs(path, exist_ok=True)
            except OSError:
                pass
        self._slots = SlotAllocator(max_slots, self._uid_range.uids if self._uid_range else None)
        self._zygotes = Zygotes(
            self._check_image,
            mode=self.mode,
            host_root=self.root_dir,
            hidden=self.hidden_paths,
            boot_timeout_s=boot_timeout_s,
            on_boot=lambda image: log.info(
                "local sandbox zygote for %r ready; protections: %s", image, self.protections()
            ),
            per_image=zygotes_per_image,
        )
        self._sandboxes: set[LocalSandbox] = set()
        self._ready: dict[str, collections.deque[tuple[KernelHandle, KernelSlot, str]]] = {}
        self._teardowns: collections.deque[tuple[KernelHandle, KernelSlot]] = collections.deque()
        self._orders: collections.deque[KernelOrder] = collections.deque()  # resets waiting
        self._orders_open = 0  # orders queued or being filled
        self._lock = threading.Condition()
        self._closed = False
        # Maps an image name that is not built in (a baked recipe) to its spec; set by envs.recipes.
        self.image_resolver: Callable[[str], ImageSpec | None] | None = None
        self._spawning: collections.Counter[str] = (
            collections.Counter()
        )  # standbys being made, per image
        self._live: collections.Counter[str] = collections.Counter()  # episodes running, per image
        self._forgotten: set[str] = set()  # baked images whose zygote stops once their episodes end
        self._demand: dict[str, StandbyDemand] = {}  # each image's pool size, from its bursts
        # Two workers per zygote an image may have: while one waits on its zygote's fork or
        # a v1 cgroup move (an RCU grace period, ~12 ms of waiting), the other activates,
        # warms or tears down.
        self._workers = [
            threading.Thread(
                target=self._maintain,
                args=(i % 2 == 0,),
                name=f"local-sandbox-standbys-{i}",
                daemon=True,
            )
            for i in range(_WORKERS_PER_ZYGOTE * self._zygotes.per_image)
        ]
        for worker in self._workers:
            worker.start()

    # ── public API ──────────────────────────────────────────────────────────
    def protections(self) -> dict[str, bool | str]:
        """Which protections episodes get, e.g. ``{"isolation": "full", "seccomp": True, ...}``."""
        shown = (
            str(self.standbys)
            if self.max_standbys == self.standbys
            else f"{self.standbys}-{self.max_standbys}"
        )
        return protection_report(
            self.mode, self.isolation_report, self._cgroups, self._uid_range, shown, self.limits
        )

    def standby_count(self) -> int:
        """Kernels forked, isolated and ready to hand out now, over all images (``/metrics``)."""
        with self._lock:
            return sum(len(ready) for ready in self._ready.values())

    def kernels_on_order(self) -> int:
        """Episodes whose kernel order is not filled yet (``/metrics``)."""
        with self._lock:
            return self._orders_open

    def use_image_resolver(self, resolve: Callable[[str], ImageSpec | None]) -> None:
        """Serve baked recipes: ``resolve`` maps an image name to its package directory."""
        self.image_resolver = resolve

    def warm_up(self, image: str = "default") -> None:
        """Start ``image``'s zygote now and begin keeping standbys for it. A server whose pool
        grows to bursts (``max_standbys`` above ``standbys``) boots the image's other
        zygotes now too, in the background: its first burst is forked by all of them.

        Raises:
            SandboxError: The image is unknown or its zygote failed to start.
        """
        self._check_image(image)
        self._zygotes.boot(image)
        while self.max_standbys > self.standbys and self._zygotes.grow(image):
            pass
        with self._lock:
            self._ready.setdefault(image, collections.deque())
            self._lock.notify_all()

    def start(
        self,
        image: str,
        *,
        files: dict[str, str],
        seed: int | None = None,
        env: dict[str, str] | None = None,
    ) -> LocalSandbox:
        """Start a fresh sandbox; see ``SandboxBackend.start``.

        With the image's zygote running, the kernel is *ordered* (``kernel_orders``)
        and this returns at once: a worker hands out a standby, or forks a kernel if
        none is ready, and activates it with the task files while the episode's first
        turn is written; the first call waits for it if need be. Otherwise (the zygote
        must boot first) the kernel is started on this thread, so that an image that
        cannot start fails this call.

        Raises:
            SandboxError: The backend is closed, the image is unknown, a task
                file could not be read, or no kernel could be started here.
        """
        sandbox = self._start(image, files, seed, env, may_block=True)
        assert sandbox is not None
        return sandbox

    def start_nowait(
        self,
        image: str,
        *,
        files: dict[str, str],
        seed: int | None = None,
        env: dict[str, str] | None = None,
    ) -> LocalSandbox | None:
        """Start a sandbox if that needs no waiting (the image's zygote runs: the kernel is
        ordered), else None; see ``SandboxBackend.start_nowait``."""
        return self._start(image, files, seed, env, may_block=False)

    def running_images(self) -> list[str]:
        """Images whose zygote is running."""
        return self._zygotes.running()

    def close(self) -> None:
        """Close every live sandbox and standby, stop the zygotes. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            sandboxes = list(self._sandboxes)
            orders = list(self._orders)
            self._orders.clear()
            self._orders_open -= len(orders)
            self._lock.notify_all()
        for order in orders:
            order.fail("the sandbox backend was closed")
            self._order_done(order)
        for sandbox in sandboxes:
            sandbox.close()
        for worker in self._workers:
            worker.join(timeout=30)
        with self._lock:
            standbys = [(k, s) for ready in self._ready.values() for k, s, _ in ready]
            self._ready.clear()
        for kernel, slot in standbys:
            self._kill(kernel, slot)
            self._teardowns.append((kernel, slot))
        self._run_teardowns()
        self._zygotes.stop_all()
        if self._cgroups is not None:
            self._cgroups.close()
        if self._uid_range is not None:
            self._uid_range.release()
        if self._owns_root:
            shutil.rmtree(self.root_dir, ignore_errors=True)


def from_settings(settings: BackendSettings) -> LocalSandboxBackend:
    """The backend ``make_backend`` builds for ``backend = "local"``."""
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
        max_standbys=settings.max_standbys,
        # Every session's episode, a parked one per session (a dropped socket's, kept for
        # its resume), the standbys, and room for teardowns; 1,024 at least.
        max_slots=max(
            1024, 2 * settings.max_sessions + 2 * max(settings.standbys, settings.max_standbys or 0)
        ),
        uid_base=settings.uid_base,
        hidden_paths=(str(cache_root()), str(settings.state_dir)),
        per_process_limits=getattr(settings, "per_process_limits", None),
        zygotes_per_image=getattr(settings, "zygotes", None),
    )
