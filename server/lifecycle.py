"""What the app does when it starts and when it stops, as Starlette startup/shutdown hooks.

Start: accept sessions again (an app served again after a shutdown, as tests and
``eval`` do), redact tokens in uvicorn's freshly configured loggers, start the idle
clock of the sessions and warm the sandbox backend so the first reset is fast (if it has
anything to prepare: ``envs/capabilities.WarmsUp``).
Stop: stop the idle clock, refuse new sessions, end every session (parked ones too:
episodes end, trajectories are flushed), stop the idle scoring workers (they start again
on demand: ``verifiers/score_pool.py``), then close the runtime if the app built it.
"""

from __future__ import annotations

import asyncio

from fastapi import FastAPI

from analyst_env.envs.capabilities import warm_up
from analyst_env.server.auth import redact_tokens_in_logs
from analyst_env.server.runtime import Runtime
from analyst_env.server.sessions import Sessions
from analyst_env.server.ws_endpoint import SessionSockets
from analyst_env.verifiers.bounded import SCORING_POOL


def install_lifecycle(
    app: FastAPI,
    runtime: Runtime,
    sessions: Sessions,
    sockets: SessionSockets,
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
        await asyncio.get_running_loop().run_in_executor(None, warm_up, runtime.backend)

    async def close_sessions() -> None:  # sessions without a socket (HTTP /mcp), parked ones
        sessions.stop_reaper()
        sockets.draining = True
        sockets.parking.clear()
        await sessions.close_all()
        await asyncio.get_running_loop().run_in_executor(None, SCORING_POOL.close)

    async def close_runtime() -> None:
        runtime.close()

    redact_tokens_in_logs()
    app.router.on_startup.extend([accept_sessions, redact_logs, start_idle_clock, warm_backend])
    app.router.on_shutdown.append(close_sessions)
    if owns_runtime:
        app.router.on_shutdown.append(close_runtime)
