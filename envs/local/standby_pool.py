"""How many standby kernels an image's pool should hold, learnt from the resets it serves.

A trainer resets its whole batch at once (a GRPO step resets 64-1,024 episodes
together), then waits for its model for seconds or minutes. A standby serves a
reset in about a millisecond of server work; without one, the reset forks a
kernel, and the zygote forks one at a time (~6 ms each here, mostly the kernel
copying its page tables), so the 256th reset of a burst waits for 255 forks.
A fixed pool is either too small for the batch or large for nothing.

``StandbyDemand`` sizes the pool from what it sees: the largest burst of the
last ``hold_s`` seconds, between a floor (the ``standbys`` setting) and a
ceiling (``max_standbys``). A burst is a run of resets with at least one in
flight all along (a batch of 256 sent together is one burst of 256; a steady
trickle is bursts of one or two), counted over ``_BURST_S`` at most, so that a
stream that never pauses asks for what arrives in that time. Refilling is held back
while a burst is being served (``burst_in_progress``): the forks would compete
with the burst for the CPU and the zygote, and the pool refills in the pause
that follows, while the trainer's model writes its next turns. Teardowns wait
too (``SlotWorkers._kill`` freezes the episodes a burst ends and kills them
after it): a process's exit costs milliseconds of CPU.

Not thread-safe on its own: the backend calls it under its lock.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable

#: How long a burst's size is remembered (a training step's generation can take minutes).
HOLD_S = 600.0
#: Buckets the hold window is kept in (the sliding maximum's resolution).
_BUCKETS = 10
#: A burst's size is counted over this long at most (then a new count starts).
_BURST_S = 5.0
#: Resets in flight together that make a burst (a trainer's batch), not a few clients' stream:
#: a steady stream of validators or evaluators must neither stop refilling nor hold teardowns.
BURST_MIN_IN_FLIGHT = 8
#: A burst is over when no reset began or ended for this long, even if some are still running
#: (a reset stuck on a hung kernel must not hold refilling back).
_QUIET_S = 1.0


class StandbyDemand:
    """The standby target of one image's pool.

    Args:
        floor: Standbys kept however quiet it is (0 disables the pool entirely).
        ceiling: Standbys kept at most, however large the bursts (raised to ``floor``).
        hold_s: How long a burst's size keeps the pool at that size.
        clock: Monotonic seconds (tests pass a fake).
    """

    def __init__(
        self,
        floor: int,
        ceiling: int,
        hold_s: float = HOLD_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if floor < 0 or ceiling < 0 or hold_s <= 0:
            raise ValueError("floor and ceiling must be >= 0 and hold_s > 0")
        self.floor = floor
        self.ceiling = max(ceiling, floor)
        self._bucket_s = hold_s / _BUCKETS
        self._clock = clock
        self._peaks: collections.deque[tuple[int, int]] = collections.deque()  # (bucket, peak)
        self.in_flight = 0
        self._last_progress = float("-inf")
        self._burst = 0  # resets in the current burst
        self._burst_began = float("-inf")

    def began(self) -> None:
        """A reset started asking for a kernel."""
        now = self._clock()
        if self.in_flight == 0 or now - self._burst_began > _BURST_S:
            self._burst, self._burst_began = 0, now
        self.in_flight += 1
        self._burst += 1
        self._last_progress = now
        self._record(self._burst)

    def ended(self) -> None:
        """A reset has its kernel (or gave up)."""
        self.in_flight = max(0, self.in_flight - 1)
        self._last_progress = self._clock()

    def target(self) -> int:
        """Standbys the pool should hold now."""
        if self.floor == 0:
            return 0
        self._expire()
        seen = max((peak for _, peak in self._peaks), default=0)
        return min(self.ceiling, max(self.floor, seen))

    def burst_in_progress(self) -> bool:
        """Whether a batch of resets is arriving together right now (refilling would slow it)."""
        return (
            self.in_flight >= BURST_MIN_IN_FLIGHT and self._clock() - self._last_progress < _QUIET_S
        )

    def _record(self, value: int) -> None:
        bucket = int(self._clock() // self._bucket_s)
        if self._peaks and self._peaks[-1][0] == bucket:
            if value > self._peaks[-1][1]:
                self._peaks[-1] = (bucket, value)
        else:
            self._peaks.append((bucket, value))
        self._expire()

    def _expire(self) -> None:
        oldest = int(self._clock() // self._bucket_s) - _BUCKETS + 1
        while self._peaks and self._peaks[0][0] < oldest:
            self._peaks.popleft()
