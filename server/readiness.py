"""``GET /ready`` for load balancers and clients, and the sibling-only question "do you hold
this session?" of ``serve --workers N``.

Both read the server's sessions (``sessions.py``) and the drain's flag
(``ws_endpoint.SessionSockets``), ``/ready`` also the backend's warm-up
(``lifecycle.BackendWarmUp``: not ready before its first kernel can be made); a worker
answers for its siblings too unless asked with ``local=1`` (which is how siblings ask
each other).
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from analyst_env.server.lifecycle import BackendWarmUp
from analyst_env.server.peers import HOLDS_ROUTE, Peers, from_sibling
from analyst_env.server.sessions import Sessions
from analyst_env.server.ws_endpoint import SessionSockets


def mount_readiness(
    app: FastAPI,
    sessions: Sessions,
    sockets: SessionSockets,
    max_sessions: int,
    siblings: Peers | None,
    warm_up: BackendWarmUp,
) -> None:
    """Add ``/ready`` and the siblings' ``{HOLDS_ROUTE}/<session id>`` to ``app``."""

    @app.get(f"{HOLDS_ROUTE}/{{session_id}}", include_in_schema=False)
    async def holds_session(session_id: str, request: Request) -> JSONResponse:
        """For sibling workers only: whether this worker's registry holds ``session_id``."""
        if not from_sibling(request.scope):
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        return JSONResponse({"held": session_id in sessions})

    @app.get("/ready", tags=["Health"])
    async def readiness(local: bool = False) -> JSONResponse:
        """Readiness: 200 ``{"status": "ready", "live_sessions": n, "max_sessions": m}``; 503
        with ``"status": "starting"`` while the sandbox backend warms up (its first kernel
        cannot be made yet), ``"failed"`` if that failed (the server is stopping),
        ``"draining"`` once shutdown began, or ``"full"`` at ``--max-sessions``
        (a load balancer, or a client given several replicas, then sends new sessions
        elsewhere; the counts let a client pick the least-loaded). Under ``serve --workers
        N`` the counts are every answering worker's (``"workers"``); ``local=1``: this
        worker's alone."""
        live, limit = len(sessions), max_sessions
        counts = {"live_sessions": live, "max_sessions": limit}
        if siblings is not None and not local:
            theirs = await siblings.ask("/ready")
            counts = {
                "live_sessions": live + sum(int(r.get("live_sessions", 0)) for r in theirs),
                "max_sessions": limit + sum(int(r.get("max_sessions", 0)) for r in theirs),
                "workers": 1 + len(theirs),
            }
            live, limit = counts["live_sessions"], counts["max_sessions"]
        if warm_up.status != "ready":
            return JSONResponse({"status": warm_up.status, **counts}, status_code=503)
        if sockets.draining:
            return JSONResponse({"status": "draining", **counts}, status_code=503)
        if live >= limit:
            return JSONResponse({"status": "full", **counts}, status_code=503)
        return JSONResponse({"status": "ready", **counts})
