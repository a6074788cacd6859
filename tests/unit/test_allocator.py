"""The server gives freed heap memory back: a peak of small blocks does not stay in its RSS.

Run in fresh interpreters: the trimming thread is per process, and the test process's own
heap is not a clean slate.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

PEAK_THEN_FREE = """
import sys, time
from analyst_env.server.allocator import return_freed_memory

def rss_mib():
    with open("/proc/self/status") as f:
        return int(next(l for l in f if l.startswith("VmRSS")).split()[1]) // 1024

assert return_freed_memory(every_s=float(sys.argv[1]))
assert return_freed_memory(every_s=float(sys.argv[1]))  # idempotent: still one thread
import threading
assert sum(t.name == "analyst-env-malloc-trim" for t in threading.enumerate()) == 1
blocks = [bytes(2000) for _ in range(100_000)]  # ~200 MiB of blocks glibc's heap serves
pins = blocks[::500]  # survivors spread over the heap: it cannot shrink from the top
peak = rss_mib()
del blocks
time.sleep(1.5)
print(peak, rss_mib())
"""


def peak_and_after(every_s: float) -> tuple[int, int]:
    out = subprocess.run(
        [sys.executable, "-c", PEAK_THEN_FREE, str(every_s)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split()
    return int(out[0]), int(out[1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap")
def test_a_freed_peak_goes_back_to_the_system() -> None:
    peak, after = peak_and_after(every_s=0.2)
    assert peak > 150
    assert after < peak - 150, (peak, after)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap")
def test_without_the_trim_the_peak_stays() -> None:
    """The control: what the trimming thread is there for (glibc keeps the pages)."""
    peak, after = peak_and_after(every_s=3600)
    assert after > peak - 50, (peak, after)
