"""CPU time of one call, for the tests that guard scorers against super-linear inputs.

Those tests bound how long a scorer may take on a pathological answer. Wall time would
measure the machine's other work, and the process's CPU time the test process's other
threads (servers and relays that earlier tests started), so this counts the calling
thread's CPU only. The cyclic collector is off during the call, so that a collection of
the test process's own heap (large late in a suite) does not land inside it. (A full
collection before each call did the same at ~100 ms each late in the suite: 13 s per
test instead of 2.)
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any


def cpu_seconds(fn: Callable[..., Any], *args: Any) -> tuple[Any, float]:
    """``fn(*args)``'s result and the CPU time this thread spent in it."""
    gc.disable()
    try:
        started = time.thread_time()
        result = fn(*args)
        return result, time.thread_time() - started
    finally:
        gc.enable()
