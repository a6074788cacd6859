"""The local backend's zygotes: one warm process per image, booted on first use.

A zygote imports its image's modules once and forks every kernel of that image
(``zygote_client``). Requests to the zygotes are serialized by one lock: a fork
copies the zygote's page tables (~5 ms), and the zygote answers one request at a
time anyway. A zygote found dead is replaced on the next request; the slots it
held lived in its namespace, so their kernels died with it (the backend discards
them) and a slot reused on the new zygote is created afresh.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from analyst_env.envs.kernel.image_specs import ImageSpec
from analyst_env.envs.local.kernel import KernelHandle
from analyst_env.envs.local.slots import KernelSlot
from analyst_env.envs.local.zygote_client import ZygoteDied, ZygoteProcess

log = logging.getLogger("analyst_env.envs.local.backend")


class Zygotes:
    """Each image's zygote, started when first needed and replaced when found dead.

    Args:
        spec_of: The spec of an image name (raises for an unknown one).
        mode: The isolation mode kernels are forked into.
        host_root: Directory for the zygotes' private root views.
        hidden: Host directories the views must hide.
        boot_timeout_s: How long a zygote may take to import and warm its image.
        on_boot: Called with the image name after a zygote boots (the backend logs
            its protections there).
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
    ) -> None:
        self._spec_of = spec_of
        self._mode = mode
        self._host_root = host_root
        self._hidden = hidden
        self._boot_timeout_s = boot_timeout_s
        self._on_boot = on_boot
        self._by_image: dict[str, ZygoteProcess] = {}
        self._lock = threading.Lock()

    def boot(self, image: str) -> None:
        """Start ``image``'s zygote now unless it runs already.

        Raises:
            SandboxError: The image is unknown or its zygote failed to start.
        """
        with self._lock:
            self._serving_locked(image)

    def fork(self, slot: KernelSlot, request: dict[str, Any]) -> tuple[KernelHandle, str]:
        """Fork a kernel into ``slot`` (``request`` is the zygote's ``fork`` request).

        A zygote that died after its liveness check is replaced and asked once more.

        Raises:
            ZygoteDied: The replacement died too.
            SandboxError: The zygote refused the request or could not boot.
        """
        fresh = request["fresh"]
        with self._lock:
            for attempt in range(2):
                zygote = self._serving_locked(slot.image)
                # A slot lives in its zygote's namespace: a new zygote must create it again.
                request["fresh"] = fresh or slot.zygote is not zygote
                try:
                    kernel, workdir = zygote.fork(request)
                    slot.zygote = zygote
                    return kernel, workdir
                except ZygoteDied:
                    self._by_image.pop(slot.image).stop()
                    if attempt:
                        raise
        raise AssertionError("unreachable")

    def release(self, slot: KernelSlot) -> None:
        """Remove the slot's directory, if the zygote that made it still serves its image."""
        with self._lock:
            zygote = self._by_image.get(slot.image)
            if zygote is not None and zygote is slot.zygote and zygote.alive():
                try:
                    zygote.release(slot.name)
                except ZygoteDied:
                    pass

    def serving(self, image: str) -> ZygoteProcess | None:
        """``image``'s zygote if it is alive (standbys forked by any other one are dead)."""
        current = self._by_image.get(image)
        return current if current is not None and current.alive() else None

    def pid(self, image: str) -> int | None:
        """The process id (the server's view) of ``image``'s zygote, if one was started."""
        current = self._by_image.get(image)
        return current.host_pid if current is not None else None

    def running(self) -> list[str]:
        """Images whose zygote is running."""
        with self._lock:
            return sorted(image for image, zygote in self._by_image.items() if zygote.alive())

    def stop(self, image: str) -> bool:
        """Stop ``image``'s zygote; whether one was running."""
        with self._lock:
            zygote = self._by_image.pop(image, None)
        if zygote is None:
            return False
        zygote.stop()
        return True

    def stop_all(self) -> None:
        """Stop every zygote (the backend closes)."""
        with self._lock:
            for zygote in self._by_image.values():
                zygote.stop()
            self._by_image.clear()

    def _serving_locked(self, image: str) -> ZygoteProcess:
        zygote = self._by_image.get(image)
        if zygote is None or not zygote.alive():
            if zygote is not None:
                zygote.stop()
            zygote = ZygoteProcess(
                image,
                spec=self._spec_of(image),
                mode=self._mode,
                host_root=self._host_root,
                hidden=self._hidden,
                boot_timeout_s=self._boot_timeout_s,
            )
            self._by_image[image] = zygote
            self._on_boot(image)
        return zygote
