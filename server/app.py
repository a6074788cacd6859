"""The FastAPI app: OpenEnv's own routes around ``AnalystEnvironment``.

``build_app`` wires settings, the shared runtime and OpenEnv's
``create_fastapi_app`` (``/ws``, ``/mcp``, ``/reset``, ``/step``, ``/state``,
``/schema``, ``/metadata``, ``/health`` and the Task API) plus ``/sandbox`` (which
protections the sandbox backend gives episodes), replaces the ``/ws`` and ``/mcp``
WebSocket endpoints with ``ws_endpoint``'s (same protocol, no frame ends a session)
and ``/reset`` with ``http_reset``'s (4xx for the reset's own errors), adds the optional
bearer token, and warms the sandbox backend at startup so the first reset is
fast. ``app`` (for ``uvicorn analyst_env.server.app:app``) is built on first
access from ``ANALYST_ENV_*`` variables.
"""

from __future__ import annotations

import asyncio
import functools

from analyst_env.openenv_compat import load_openenv

load_openenv()  # before the first openenv import: skips its unused Gradio UI

# E402: the imports below must run after load_openenv() above.
from fastapi import FastAPI, Request  # noqa: E402
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse  # noqa: E402
from openenv.core.env_server.http_server import create_fastapi_app  # noqa: E402
from openenv.core.env_server.mcp_types import CallToolAction  # noqa: E402
from openenv.core.env_server.types import ConcurrencyConfig  # noqa: E402

from analyst_env.models import AnalystResetObservation, AnalystState, AnalystToolObservation  # noqa: E402
from analyst_env.server.auth import BearerTokenMiddleware, redact_tokens_in_logs  # noqa: E402
from analyst_env.server.environment import AnalystEnvironment  # noqa: E402
from analyst_env.server.envs_routes import mount_envs  # noqa: E402
from analyst_env.server.http_mcp import install_http_mcp  # noqa: E402
from analyst_env.server.http_reset import install_http_reset  # noqa: E402
from analyst_env.server.metrics import mount_metrics  # noqa: E402
from analyst_env.server.openapi_errors import document_errors  # noqa: E402
from analyst_env.server.peers import HOLDS_ROUTE, Peers, from_sibling  # noqa: E402
from analyst_env.server.runtime import Runtime  # noqa: E402
from analyst_env.server.settings import Settings  # noqa: E402
from analyst_env.server.step_action import install_http_step  # noqa: E402
from analyst_env.server.web import mount_web  # noqa: E402
from analyst_env.server.web.routes import STATIC_DIR  # noqa: E402
from analyst_env.server.ws_endpoint import install_ws_endpoints  # noqa: E402

ENV_NAME = "analyst_env"


def build_app(settings: Settings | None = None, *, runtime: Runtime | None = None) -> FastAPI:
    """The server app for ``settings`` (default: from the environment).

    A ``runtime`` passed in stays the caller's to close; one built here is
    closed when the app shuts down.
    """
    settings = settings or Settings.from_env()
    owns_runtime = runtime is None
    runtime = runtime or Runtime(settings)
    app = create_fastapi_app(
        functools.partial(AnalystEnvironment, runtime),
        CallToolAction,
        AnalystToolObservation,
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=settings.max_sessions,
            session_timeout=settings.session_idle_timeout_s,
        ),
        env_name=ENV_NAME,
        state_cls=AnalystState,
        reset_observation_cls=AnalystResetObservation,
    )
    app.state.runtime = runtime
    siblings = Peers.from_env(settings.token)  # the other workers of `serve --workers N`
    # /ws and /mcp that answer every bad frame and never reap an open socket
    sockets = install_ws_endpoints(app, settings.resume_grace_s, siblings)
    install_http_reset(app, lambda: sockets.draining)  # reset errors as 4xx with the /ws message
    install_http_step(app)  # an action OpenEnv cannot read is a 422, not a 500
    install_http_mcp(app, lambda: sockets.draining, siblings)  # no new sessions while draining
    mount_web(app, runtime, ENV_NAME)  # the /web debugging UI
    mount_envs(app, runtime)  # /envs: sandbox environments (recipes, builds), bound at reset
    mount_metrics(app, runtime)  # /metrics for Prometheus (after /envs: it counts builds)

    def protections() -> dict:
        return runtime.backend.protections()

    @app.get("/", include_in_schema=False)
    async def root(request: Request) -> RedirectResponse:
        """``serve`` prints the server's URL: a browser opened there lands on the /web UI (a
        ``?token=`` goes along, as /web's own bootstrap reads it)."""
        query = request.url.query
        return RedirectResponse("/web" + (f"?{query}" if query else ""), status_code=307)

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> FileResponse:
        """The icon browsers ask for on every page (/docs too), instead of a 404 in the log."""
        return FileResponse(STATIC_DIR / "favicon.svg", media_type="image/svg+xml")

    @app.get("/sandbox", tags=["Environment Info"])
    async def sandbox_protections() -> dict:
        """The sandbox backend and the protections in force for its episodes (isolation, limits,
        cgroups).

        Every entry is what start-up verified, not what was requested (a claim that
        could not be verified stops the server: docs/security.md, "Fail-closed rule").
        ``isolation`` is the mode that was tried and is in use, ``limits`` how memory,
        CPU and pids are enforced, ``degraded`` what that mode normally gives but this
        host could not (with the operator's consent), ``stronger_modes_unavailable``
        each stronger mode and why it failed here, ``verified`` what a kernel confined
        this way saw of itself; ``unconfined`` (with a ``warning``) for ``none``.
        """
        return {"backend": runtime.backend.name, "protections": protections()}

    # OpenEnv's /health says only "healthy"; ours also names the isolation in force,
    # so an operator's probe sees a server that runs with less than it should.
    app.router.routes[:] = [r for r in app.router.routes if getattr(r, "path", None) != "/health"]

    @app.get("/health", tags=["Health"])
    async def health() -> dict:
        """Liveness: ``{"status": "healthy", "sandbox": {backend, isolation, degraded,
        verified}}``, plus ``unconfined`` and a ``warning`` under isolation ``none``.

        What was verified at start-up, as ``/sandbox`` reports it."""
        info = protections()
        sandbox = {
            "backend": runtime.backend.name,
            "isolation": info.get("isolation"),
            "degraded": info.get("degraded", ""),
            "verified": info.get("verified", ""),
        }
        if info.get("unconfined"):
            sandbox.update(unconfined=True, warning=info.get("warning", ""))
        return {"status": "healthy", "sandbox": sandbox}

    async def warm_backend() -> None:
        await asyncio.get_running_loop().run_in_executor(None, runtime.backend.warm_up)

    @app.get(f"{HOLDS_ROUTE}/{{session_id}}", include_in_schema=False)
    async def holds_session(session_id: str, request: Request) -> JSONResponse:
        """For sibling workers only: whether this worker's registry holds ``session_id``."""
        if not from_sibling(request.scope):
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        return JSONResponse({"held": session_id in app.state.env_server._sessions})

    @app.get("/ready", tags=["Health"])
    async def readiness(local: bool = False) -> JSONResponse:
        """Readiness: 200 ``{"status": "ready", "live_sessions": n, "max_sessions": m}``; 503
        with ``"status": "draining"`` once shutdown began, or ``"full"`` at ``--max-sessions``
        (a load balancer, or a client given several replicas, then sends new sessions
        elsewhere; the counts let a client pick the least-loaded). Under ``serve --workers
        N`` the counts are every answering worker's (``"workers"``); ``local=1``: this
        worker's alone."""
        live, limit = len(app.state.env_server._sessions), settings.max_sessions
        counts = {"live_sessions": live, "max_sessions": limit}
        if siblings is not None and not local:
            theirs = await siblings.ask("/ready")
            counts = {
                "live_sessions": live + sum(int(r.get("live_sessions", 0)) for r in theirs),
                "max_sessions": limit + sum(int(r.get("max_sessions", 0)) for r in theirs),
                "workers": 1 + len(theirs),
            }
            live, limit = counts["live_sessions"], counts["max_sessions"]
        if sockets.draining:
            return JSONResponse({"status": "draining", **counts}, status_code=503)
        if live >= limit:
            return JSONResponse({"status": "full", **counts}, status_code=503)
        return JSONResponse({"status": "ready", **counts})

    async def close_sessions() -> (
        None
    ):  # sessions without a socket (HTTP /mcp): end their episodes, flush trajectories
        sockets.draining = True
        sockets.parking.clear()
        server = app.state.env_server
        for session_id in list(server._sessions):
            await server._destroy_session(session_id)

    async def close_runtime() -> None:
        runtime.close()

    async def redact_logs() -> None:  # after uvicorn configured its loggers
        redact_tokens_in_logs()

    async def accept_sessions() -> (
        None
    ):  # an app served again after a shutdown (tests, eval) accepts sessions again
        sockets.draining = False

    redact_tokens_in_logs()
    app.router.on_startup.append(accept_sessions)
    app.router.on_startup.append(redact_logs)
    app.router.on_startup.append(warm_backend)
    app.router.on_shutdown.append(close_sessions)
    if owns_runtime:
        app.router.on_shutdown.append(close_runtime)

    if settings.token:
        app.add_middleware(BearerTokenMiddleware, token=settings.token)
    document_errors(app)  # 401 and 404 in the OpenAPI schema, where routes answer them
    return app


@functools.cache
def _default_app() -> FastAPI:
    return build_app()


def __getattr__(name: str):
    if name == "app":
        return _default_app()
    raise AttributeError(name)


def main() -> None:
    """Entry point of the OpenEnv convention (``server = analyst_env.server.app:main``)."""
    from analyst_env.cli import main as cli_main

    cli_main(["serve"])
