"""Scorers that misbehave, for the scoring-worker tests: imported both by the tests and, with
``ScoringPool(imports=["worker_scorers"], paths=[tests/])``, by the workers, so a worker runs
them as the same ``module:qualname``."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from analyst_env.verifiers import Verdict, register

LEFT_BEHIND: list[str] = []  # what an earlier answer left in the worker's memory


@register("worker_pid")
def worker_pid(submitted, gold):
    return Verdict(1.0, {}, f"pid {os.getpid()} cwd {os.getcwd()} env {os.environ.get('LEAK')}")


@register("worker_hog_memory")
def worker_hog_memory(submitted, gold):
    blocks = []
    while True:
        blocks.append(bytearray(64 * 1024 * 1024))


@register("worker_spin")
def worker_spin(submitted, gold):
    while True:
        pass


@register("worker_burn")
def worker_burn(submitted, gold):
    """Uses as many CPU seconds as the answer says, then reports where it ran."""
    end = time.process_time() + float(submitted)
    while time.process_time() < end:
        pass
    return Verdict(1.0, {}, f"pid {os.getpid()}")


@register("worker_wait_for")
def worker_wait_for(submitted, gold):
    """Sleeps (no CPU) until the file the answer names exists."""
    while not Path(submitted).exists():
        time.sleep(0.05)
    return 1.0


@register("worker_crash")
def worker_crash(submitted, gold):
    os.kill(os.getpid(), signal.SIGSEGV)


@register("worker_poison")
def worker_poison(submitted, gold):
    """Leaves state behind (a global, the directory, the environment), then fails or not."""
    LEFT_BEHIND.append(submitted)
    os.chdir("/")
    os.environ["LEAK"] = submitted
    if submitted == "raise":
        raise RuntimeError("poisoned")
    return Verdict(1.0, {}, f"left behind {len(LEFT_BEHIND)}")


@register("worker_reads")
def worker_reads(submitted, gold, *, context):
    return float(context.read_file(submitted) == b"ok")
