"""One event loop thread for a vendor SDK that is asyncio only (Deno's, Prime's live processes).

A backend's code blocks (the server runs each session's calls on a worker thread), while such
an SDK's objects belong to the loop they were made on. So one loop runs on a thread of its own
for the whole backend, every SDK object is made and used there, and blocking code hands
coroutines over with ``SdkLoop.run``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class SdkLoop:
    """One event loop thread on which every SDK call of a backend runs.

    Args:
        vendor: Names the vendor in the thread's name and in timeout errors.
    """

    def __init__(self, vendor: str) -> None:
        self.vendor = vendor
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name=f"{vendor.lower()}-sdk", daemon=True
        )
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for it.

        Raises:
            TimeoutError: It did not finish within ``timeout_s`` (it is cancelled).
        """
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"no answer from {self.vendor} within {timeout_s:g} s") from None

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
