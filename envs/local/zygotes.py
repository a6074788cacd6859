"""The local backend's zygotes: warm processes per image that fork its kernels.

A zygote imports its image's modules once and forks every kernel of that image
(``zygote_client``). One zygote answers one request at a time, and a fork copies its
page tables (~5-10 ms of CPU): a burst of 256 resets served by one zygote waits for
256 forks one after another. So an image may have up to ``per_image`` zygotes (one
per core by default), each serving one request at a time, all at once. The first
boots when the image is first used (on the caller's thread, so an image that cannot
start fails that call); the others only when the backend asks (``grow``: on a burst
of resets, or at warm-up where its pool grows to bursts), in the background while
the first keeps forking, so an idle server holds one zygote per image and a server
that saw a burst holds one per core. Every zygote is started the same way
(``ZygoteProcess``), confined the same way and refused the same way: one that fails
to boot is not added, and the image is served by the others.

A zygote found dead is dropped: the image's others serve on, a request that finds
none boots one, and the next burst boots the rest. The slots it held lived in its
namespace, so their kernels died with it (the backend discards them) and a slot
reused on another zygote is created afresh there. A kernel restarted in its slot is
forked by the zygote that holds the slot.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import Any

from analyst_env.envs.kernel.image_specs import ImageSpec
from analyst_env.envs.local.kernel import KernelHandle
from analyst_env.envs.local.slots import KernelSlot
from analyst_env.envs.local.zygote_client import ZygoteDied, ZygoteProcess

log = logging.getLogger("analyst_env.envs.local.backend")


def default_per_image() -> int:
    """Zygotes per image at most by default: one per core this process may run on."""
    return max(1, len(os.sched_getaffinity(0)))


class Zygotes:
    """Each image's zygotes: started when needed, lent to one request at a time.

    Args:
        spec_of: The spec of an image name (raises for an unknown one).
        mode: The isolation mode kernels are forked into.
        host_root: Directory for the zygotes' private root views.
        hidden: Host directories the views must hide.
        boot_timeout_s: How long a zygote may take to import and warm its image.
        on_boot: Called with the image name after a zygote boots (the backend logs
            its protections there).
        per_image: Zygotes per image at most (``default_per_image`` if ``None``).
    """

    def __init__(
        self,
        spec_of: Callable[[str], ImageSpec],
        *,
        mode: str,
        host_root: str,
        hidden: tuple[str, ...],
        boot_timeout_s: float,
        on_boot: Callable[[str], None] = lambda image: None,
        per_image: int | None = None,
    ) -> None:
        self._spec_of = spec_of
        self._mode = mode
        self._host_root = host_root
        self._hidden = hidden
        self._boot_timeout_s = boot_timeout_s
        self._on_boot = on_boot
        self.per_image = max(1, per_image if per_image is not None else default_per_image())
        self._by_image: dict[str, list[ZygoteProcess]] = {}
        self._busy: set[ZygoteProcess] = set()  # lent to a request
        self._booting: dict[str, int] = {}  # zygotes being booted, per image
        self._boot_threads: list[threading.Thread] = []
        self._stopped = False
        # Held only to choose a zygote or change the lists; a request runs without it.
        self._lock = threading.Condition()

    def boot(self, image: str) -> None:
        """Start ``image``'s first zygote now unless one runs already.

        Raises:
            SandboxError: The image is unknown or its zygote failed to start.
        """
        self._release(self._acquire(image, None))

    def grow(self, image: str) -> bool:
        """Boot one more zygote for ``image`` in the background, if it has fewer than
        ``per_image`` (running or booting) and one runs already; whether one was started."""
        with self._lock:
            live = self._live_locked(image)
            booting = self._booting.get(image, 0)
            if self._stopped or not live or len(live) + booting >= self.per_image:
                return False
            self._booting[image] = self._booting.get(image, 0) + 1
            thread = threading.Thread(
                target=self._boot_extra, args=(image,), name=f"zygote-boot-{image}", daemon=True
            )
            self._boot_threads = [t for t in self._boot_threads if t.is_alive()] + [thread]
        thread.start()
        return True

    def fork(self, slot: KernelSlot, request: dict[str, Any]) -> tuple[KernelHandle, str]:
        """Fork a kernel into ``slot`` (``request`` is the zygote's ``fork`` request).

        A slot already made (a kernel restarted in it) is forked by the zygote holding
        it while that one lives; a new slot by whichever zygote of the image is free
        first. A zygote that died after its liveness check is replaced and asked once more.

        Raises:
            ZygoteDied: The replacement died too.
            SandboxError: The zygote refused the request or could not boot.
        """
        fresh = request["fresh"]
        for attempt in range(2):
            zygote = self._acquire(slot.image, None if fresh else slot.zygote)
            try:
                # A slot lives in its zygote's namespace: another zygote must create it again.
                request["fresh"] = fresh or slot.zygote is not zygote
                kernel, workdir = zygote.fork(request)
                slot.zygote = zygote
                return kernel, workdir
            except ZygoteDied:
                self._drop(slot.image, zygote)
                if attempt:
                    raise
            finally:
                self._release(zygote)
        raise AssertionError("unreachable")

    def release(self, slot: KernelSlot) -> None:
        """Remove the slot's directory, if the zygote that made it still serves its image."""
        if slot.zygote is None:
            return
        with self._lock:
            if not self._wait_for_locked(slot.image, slot.zygote):
                return
        try:
            slot.zygote.release(slot.name)
        except ZygoteDied:
            pass
        finally:
            self._release(slot.zygote)

    def serving(self, image: str) -> bool:
        """Whether ``image`` has a zygote alive (orders can be queued for it)."""
        with self._lock:
            return bool(self._live_locked(image))

    def live(self, image: str) -> list[ZygoteProcess]:
        """``image``'s zygotes alive now (a kernel forked by any other one died with it)."""
        with self._lock:
            return self._live_locked(image)

    def pid(self, image: str) -> int | None:
        """The process id (the server's view) of ``image``'s first zygote, if one was started."""
        with self._lock:
            zygotes = self._by_image.get(image)
            return zygotes[0].host_pid if zygotes else None

    def pids(self, image: str) -> list[int]:
        """The process ids (the server's view) of ``image``'s zygotes, oldest first."""
        with self._lock:
            return [zygote.host_pid for zygote in self._by_image.get(image, [])]

    def running(self) -> list[str]:
        """Images with a zygote running."""
        with self._lock:
            return sorted(image for image in self._by_image if self._live_locked(image))

    def stop(self, image: str) -> bool:
        """Stop ``image``'s zygotes; whether one was running."""
        with self._lock:
            zygotes = self._by_image.pop(image, [])
        for zygote in zygotes:
            zygote.stop()
        return bool(zygotes)

    def stop_all(self) -> None:
        """Stop every zygote, once those still booting are up (the backend closes)."""
        with self._lock:
            self._stopped = True
            threads = list(self._boot_threads)
            self._lock.notify_all()
        for thread in threads:
            thread.join(timeout=self._boot_timeout_s + 10)
        with self._lock:
            zygotes = [zygote for zygotes in self._by_image.values() for zygote in zygotes]
            self._by_image.clear()
        for zygote in zygotes:
            zygote.stop()

    # ── lending ─────────────────────────────────────────────────────────────
    def _acquire(self, image: str, wanted: ZygoteProcess | None) -> ZygoteProcess:
        """Lend a zygote of ``image``: ``wanted`` if it lives, else the first one free, booting
        the first when none runs (on this thread, outside the lock)."""
        with self._lock:
            while True:
                if wanted is not None and self._wait_for_locked(image, wanted):
                    return wanted
                live = self._live_locked(image)
                free = [zygote for zygote in live if zygote not in self._busy]
                if free:
                    self._busy.add(free[0])
                    return free[0]
                if not live and not self._booting.get(image):
                    self._booting[image] = 1
                    break
                self._lock.wait()
        return self._start(image, lend=True)  # raises: nothing was added

    def _wait_for_locked(self, image: str, zygote: ZygoteProcess) -> bool:
        """Wait until ``zygote`` is free and take it; False if it no longer serves ``image``."""
        while zygote in self._live_locked(image):
            if zygote not in self._busy:
                self._busy.add(zygote)
                return True
            self._lock.wait()
        return False

    def _release(self, zygote: ZygoteProcess) -> None:
        with self._lock:
            self._busy.discard(zygote)
            self._lock.notify_all()

    def _live_locked(self, image: str) -> list[ZygoteProcess]:
        """``image``'s zygotes that are alive; dead ones are dropped (and stopped) here."""
        zygotes = self._by_image.get(image, [])
        dead = [zygote for zygote in zygotes if zygote not in self._busy and not zygote.alive()]
        for zygote in dead:
            zygotes.remove(zygote)
            zygote.stop()  # it exited: this only closes its socket and reaps it
        return [zygote for zygote in zygotes if zygote.alive()]

    def _drop(self, image: str, zygote: ZygoteProcess) -> None:
        with self._lock:
            zygotes = self._by_image.get(image, [])
            if zygote in zygotes:
                zygotes.remove(zygote)
        zygote.stop()

    # ── booting ─────────────────────────────────────────────────────────────
    def _start(self, image: str, *, lend: bool) -> ZygoteProcess:
        """Boot a zygote for ``image`` (``_booting`` counts it) and add it to the image's list;
        with ``lend``, lent to the caller in the same step, before any waiting request can see
        it free (two requests on one zygote would take each other's replies).

        Raises:
            SandboxError: The image is unknown or the zygote failed to start.
        """
        try:
            zygote = ZygoteProcess(
                image,
                spec=self._spec_of(image),
                mode=self._mode,
                host_root=self._host_root,
                hidden=self._hidden,
                boot_timeout_s=self._boot_timeout_s,
            )
        except BaseException:
            with self._lock:
                self._booting[image] -= 1
                self._lock.notify_all()
            raise
        with self._lock:
            self._booting[image] -= 1
            self._by_image.setdefault(image, []).append(zygote)
            if lend:
                self._busy.add(zygote)
            self._lock.notify_all()
        self._on_boot(image)
        return zygote

    def _boot_extra(self, image: str) -> None:
        try:
            zygote = self._start(image, lend=False)
        except Exception as exc:
            log.warning("could not start another zygote for %r: %s", image, exc)
            return
        with self._lock:
            closed = self._stopped
        if closed:
            self._drop(image, zygote)
