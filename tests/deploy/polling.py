"""Waiting for a condition of a live system, with a deadline and a message that says what failed."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout_s: float, message: str, every_s: float = 0.3) -> T:
    """The first truthy value of ``predicate()``; past the deadline the test fails: ``message``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, message
        time.sleep(every_s)
