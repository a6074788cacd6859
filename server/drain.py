"""Graceful drain on SIGTERM and SIGINT: finish what runs, refuse what is new, clean up, exit 0.

uvicorn on its own closes every WebSocket at once (steps in flight are lost and
their handlers log "Cannot call send once a close message has been sent") and then
re-raises the signal, so the process dies before ``analyst-env serve`` reaches
``runtime.close()``: sandboxes, the backend's scratch directory and cgroup roots stay
behind. ``DrainingServer`` instead, on the first signal:

1. marks the server draining: ``GET /ready`` answers 503 ``{"status": "draining"}``,
   new ``/ws`` and ``/mcp`` sockets get an error frame and close code 1001, HTTP
   ``/reset`` answers 503;
2. waits until no frame is being handled (a running cell finishes), at most
   ``drain_timeout_s``;
3. closes the open sockets with 1001 and lets uvicorn shut down; the app's shutdown
   hooks close every remaining session (episodes end, trajectories are flushed) and
   the caller closes the runtime (sandboxes, zygotes, scratch directory);
4. returns normally, so the process exits 0. A second signal skips the wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
import time

import uvicorn

from analyst_env.server.ws_endpoint import SessionSockets
from analyst_env.server.ws_frames import DRAINING_CLOSE_CODE, DRAINING_REASON

log = logging.getLogger("uvicorn.error")
HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class DrainingServer(uvicorn.Server):
    """A uvicorn server whose first SIGTERM/SIGINT drains (see module docstring) instead of cutting
    off."""

    def __init__(
        self, config: uvicorn.Config, sockets: SessionSockets, drain_timeout_s: float = 30.0
    ) -> None:
        super().__init__(config)
        self.sockets = sockets
        self.drain_timeout_s = drain_timeout_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._drain_task: asyncio.Task | None = None

    async def serve(self, sockets=None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    @contextlib.contextmanager
    def capture_signals(self):
        """uvicorn's, without re-raising the signal at the end (that would skip the caller's
        cleanup)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        original = {sig: signal.signal(sig, self.handle_exit) for sig in HANDLED_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)

    def handle_exit(self, sig: int, frame) -> None:
        if (
            self.sockets.draining or self._loop is None
        ):  # a second signal, or one before start-up ended
            self.should_exit = True
            self.force_exit = self.sockets.draining
            return
        self.sockets.draining = True
        self._loop.call_soon_threadsafe(self._start_drain, signal.Signals(sig).name)

    def _start_drain(self, name: str) -> None:
        self._drain_task = asyncio.ensure_future(self.drain(name))

    async def drain(self, reason: str = "request") -> None:
        """Wait for frames in flight (up to the deadline), close the sockets, then let uvicorn
        exit."""
        sockets = self.sockets
        sockets.draining = True
        deadline = time.monotonic() + self.drain_timeout_s
        log.info(
            "%s: draining: %d frame(s) in flight, %d socket(s) open; new sessions are refused",
            reason,
            sockets.in_flight,
            len(sockets.sockets),
        )
        while sockets.in_flight and time.monotonic() < deadline and not self.force_exit:
            await asyncio.sleep(0.05)
        if sockets.in_flight:
            log.warning(
                "drain deadline (%.0f s) passed with %d frame(s) still running",
                self.drain_timeout_s,
                sockets.in_flight,
            )
        for websocket in list(sockets.sockets):
            try:
                await websocket.close(code=DRAINING_CLOSE_CODE, reason=DRAINING_REASON)
            except Exception:
                pass
        self.should_exit = True
