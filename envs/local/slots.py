"""Slots: where one kernel lives (a directory in its zygote's root and, in ``full`` mode, a uid).

A slot is taken when a kernel is forked (an episode or a standby) and given back
once its teardown is complete, so the count bounds everything the backend holds:
episodes, standbys and the ones still being torn down. Uids come from the range
the backend claimed (``uid_ranges``), lowest first, so a quiet server reuses a
few uids instead of walking the whole range.
"""

from __future__ import annotations

import heapq
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from analyst_env.envs.sandbox import SandboxError

if TYPE_CHECKING:
    from analyst_env.envs.local.zygote_client import ZygoteProcess


@dataclass
class KernelSlot:
    """Where one kernel lives: its slot directory name and uid (``full`` mode)."""

    name: str
    uid: int | None
    image: str
    zygote: ZygoteProcess | None = None  # the zygote whose namespace holds the slot


class SlotAllocator:
    """Hands out at most ``capacity`` slots, with a uid each when ``uids`` are given."""

    def __init__(self, capacity: int, uids: range | None) -> None:
        self.capacity = capacity
        self._free_uids = list(uids) if uids is not None else None  # sorted: already a heap
        self._taken = 0
        self._counter = 0
        self._lock = threading.Lock()

    @property
    def in_use(self) -> int:
        """Slots taken and not yet given back."""
        return self._taken

    def take(self, image: str) -> KernelSlot:
        """A new slot for a kernel of ``image``.

        Raises:
            SandboxError: All ``capacity`` slots are in use.
        """
        with self._lock:
            if self._taken >= self.capacity:
                raise SandboxError(f"all {self.capacity} sandbox slots are in use")
            self._taken += 1
            self._counter += 1
            if self._free_uids is not None:
                uid = heapq.heappop(self._free_uids)
                return KernelSlot(name=f"u{uid}", uid=uid, image=image)
            return KernelSlot(name=f"e{self._counter}", uid=None, image=image)

    def give_back(self, slot: KernelSlot) -> None:
        """Return a torn-down slot (its uid may be handed out again)."""
        with self._lock:
            self._taken -= 1
            if slot.uid is not None and self._free_uids is not None:
                heapq.heappush(self._free_uids, slot.uid)
