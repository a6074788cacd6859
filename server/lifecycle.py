"""What the app does when it starts and when it stops, as Starlette startup/shutdown hooks.

Start: accept sessions again (an app served again after a shutdown, as tests and
``eval`` do), redact tokens in uvicorn's freshly configured loggers, start the idle
clock of the sessions and start warming the sandbox backend (``BackendWarmUp``; if it has
anything to prepare: ``envs/capabilities.WarmsUp``) so the first reset is fast.
Stop: stop the idle clock, refuse new sessions, end every session (parked ones too:
episodes end, trajectories are flushed), stop the idle scoring workers (they start again
on demand: ``verifiers/score_pool.py``), then close the runtime if the app built it.

The warm-up (the local backend's zygote importing pandas, numpy and duckdb: a second or
more of CPU) is not awaited: ``/health`` answers once the routes are served, which is
honest because everything it reports (the isolation mode, what the probe verified) was
checked when the backend was made, before the app existed. ``/ready`` answers 503
``"starting"`` until the warm-up has finished. A reset that comes earlier waits for the
same boot (the backend starts the kernel itself), so no episode ever runs before its
image's zygote is up and confined; a warm-up that fails stops the server
(``on_failure``: ``serve`` exits 2 with one line), as a failed start did when start-up
waited for it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable

from fastapi import FastAPI

from analyst_env.envs.capabilities import warm_up as warm_backend_up
from analyst_env.server.auth import redact_tokens_in_logs
from analyst_env.server.runtime import Runtime
from analyst_env.server.sessions import Sessions
from analyst_env.server.ws_endpoint import SessionSockets
from analyst_env.verifiers.bounded import SCORING_POOL

log = logging.getLogger("uvicorn.error")


class BackendWarmUp:
    """Where the sandbox backend's warm-up stands: ``"starting"``, ``"ready"`` or ``"failed"``.

    Attributes:
        error: Why it failed (one line), else ``""``.
        on_failure: Called once, on the event loop, when it fails: ``serve`` stops the
            server there (None: an app served in process only reports it at ``/ready``).
    """

    def __init__(self) -> None:
        self.status = "starting"
        self.error = ""
        self.on_failure: Callable[[], None] | None = None
        self._task: asyncio.Future | None = None

    def start(self, warm_up: Callable[[], None]) -> None:
        """Run ``warm_up`` on a thread of the running loop's executor; return at once."""
        self.status, self.error = "starting", ""
        self._task = asyncio.get_running_loop().run_in_executor(None, warm_up)
        self._task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Future) -> None:
        exc = None if task.cancelled() else task.exception()
        if exc is None:
            self.status = "ready"
            return
        self.status = "failed"
        self.error = " ".join(str(exc).split()) or type(exc).__name__
        log.error("the sandbox backend failed to start: %s", self.error)
        if self.on_failure is not None:
            self.on_failure()


def install_lifecycle(
    app: FastAPI,
    runtime: Runtime,
    sessions: Sessions,
    sockets: SessionSockets,
    warm_up: BackendWarmUp,
    *,
    owns_runtime: bool,
) -> None:
    """Append ``app``'s startup and shutdown hooks (module docstring)."""

    async def accept_sessions() -> None:
        sockets.draining = False

    async def redact_logs() -> None:  # after uvicorn configured its loggers
        redact_tokens_in_logs()

    async def start_idle_clock() -> None:
        sessions.start_reaper()

    async def warm_backend() -> None:
        warm_up.start(functools.partial(warm_backend_up, runtime.backend))

    async def size_scoring_pool() -> None:  # 0: every scoring in a forked child
        SCORING_POOL.max_workers = runtime.settings.score_workers

    async def close_sessions() -> None:  # sessions without a socket (HTTP /mcp), parked ones
        sessions.stop_reaper()
        sockets.draining = True
        sockets.parking.clear()
        await sessions.close_all()
        await asyncio.get_running_loop().run_in_executor(None, SCORING_POOL.close)

    async def close_runtime() -> None:
        runtime.close()

    redact_tokens_in_logs()
    app.router.on_startup.extend(
        [accept_sessions, redact_logs, start_idle_clock, size_scoring_pool, warm_backend]
    )
    app.router.on_shutdown.append(close_sessions)
    if owns_runtime:
        app.router.on_shutdown.append(close_runtime)
