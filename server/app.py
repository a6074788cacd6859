"""The FastAPI app: wiring only (every route and hook lives in its own module).

``build_app`` builds, for ``settings``:

* OpenEnv's ``create_fastapi_app`` for the routes that hold no session (``/state``,
  ``/schema``, ``/metadata``, the Task API);
* the sessions every transport shares (``sessions.py``) and the MCP JSON-RPC handler
  on them (``mcp_rpc.py``);
* our ``/ws`` and ``/mcp`` WebSockets (``ws_endpoint.py``, ``ws_mcp.py``), HTTP
  ``/mcp`` (``http_mcp.py``), and OpenEnv's ``/reset`` and ``/step`` with checks in
  front (``http_reset.py``, ``step_action.py``), all on those sessions;
* ``/web``, ``/envs``, ``/metrics``, ``/``, ``/sandbox``, ``/health`` (``info_routes.py``),
  ``/ready`` (``readiness.py``), the start and stop hooks and the backend's warm-up
  (``lifecycle.py``), the optional bearer token, the refusal of other sites' pages
  (``same_origin.py``), the cap on request bodies (``body_limit.py``) and the OpenAPI
  error statuses.

``app`` (for ``uvicorn analyst_env.server.app:app``) is built on first access from
``ANALYST_ENV_*`` variables.
"""

from __future__ import annotations

import functools

from analyst_env.openenv_compat import load_openenv

load_openenv()  # before the first openenv import: skips its unused Gradio UI

# E402: the imports below must run after load_openenv() above.
from fastapi import FastAPI  # noqa: E402
from openenv.core.env_server.http_server import create_fastapi_app  # noqa: E402
from openenv.core.env_server.mcp_types import CallToolAction  # noqa: E402
from openenv.core.env_server.types import ConcurrencyConfig  # noqa: E402

from analyst_env.models import AnalystResetObservation, AnalystState, AnalystToolObservation  # noqa: E402
from analyst_env.server.auth import BearerTokenMiddleware  # noqa: E402
from analyst_env.server.body_limit import BodyLimitMiddleware  # noqa: E402
from analyst_env.server.environment import AnalystEnvironment  # noqa: E402
from analyst_env.server.envs_routes import mount_envs  # noqa: E402
from analyst_env.server.http_mcp import install_http_mcp  # noqa: E402
from analyst_env.server.http_reset import install_http_reset  # noqa: E402
from analyst_env.server.info_routes import mount_info  # noqa: E402
from analyst_env.server.lifecycle import BackendWarmUp, install_lifecycle  # noqa: E402
from analyst_env.server.mcp_rpc import McpRpc  # noqa: E402
from analyst_env.server.metrics import mount_metrics  # noqa: E402
from analyst_env.server.openapi_errors import document_errors  # noqa: E402
from analyst_env.server.peers import Peers  # noqa: E402
from analyst_env.server.readiness import mount_readiness  # noqa: E402
from analyst_env.server.runtime import Runtime  # noqa: E402
from analyst_env.server.same_origin import RefusingMiddleware, cross_origin  # noqa: E402
from analyst_env.server.sessions import Sessions  # noqa: E402
from analyst_env.server.settings import Settings  # noqa: E402
from analyst_env.server.step_action import install_http_step  # noqa: E402
from analyst_env.server.web import mount_web  # noqa: E402
from analyst_env.server.ws_endpoint import SessionSockets, install_ws_endpoints  # noqa: E402

ENV_NAME = "analyst_env"


def build_app(settings: Settings | None = None, *, runtime: Runtime | None = None) -> FastAPI:
    """The server app for ``settings`` (default: from the environment).

    A ``runtime`` passed in stays the caller's to close; one built here is
    closed when the app shuts down.
    """
    settings = settings or Settings.from_env()
    owns_runtime = runtime is None
    runtime = runtime or Runtime(settings)
    factory = functools.partial(AnalystEnvironment, runtime)
    app = create_fastapi_app(
        factory,
        CallToolAction,
        AnalystToolObservation,
        # the sessions below enforce the limit and the idle timeout; OpenEnv's checks the
        # environment supports concurrent sessions
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=settings.max_sessions, session_timeout=None
        ),
        env_name=ENV_NAME,
        state_cls=AnalystState,
        reset_observation_cls=AnalystResetObservation,
    )
    app.state.runtime = runtime
    sessions = Sessions(factory, settings.max_sessions, settings.session_idle_timeout_s)
    rpc = McpRpc(sessions)
    siblings = Peers.from_env(settings.token)  # the other workers of `serve --workers N`
    # /ws and /mcp that answer every bad frame and never reap an open socket
    sockets = SessionSockets(sessions, rpc, CallToolAction, settings.resume_grace_s, siblings)
    install_ws_endpoints(app, sockets)
    app.state.sessions, app.state.sockets = sessions, sockets

    def draining() -> bool:
        return sockets.draining

    install_http_reset(app, sessions, draining)  # reset errors as 4xx with the /ws message
    install_http_step(app)  # an action OpenEnv cannot read is a 422, not a 500
    install_http_mcp(app, sessions, rpc, draining, siblings)  # no new sessions while draining
    mount_web(app, runtime, ENV_NAME)  # the /web debugging UI
    mount_envs(app, runtime)  # /envs: sandbox environments (recipes, builds), bound at reset
    mount_metrics(app, runtime)  # /metrics for Prometheus (after /envs: it counts builds)
    mount_info(app, runtime)  # /, /favicon.ico, /sandbox, /health
    warm_up = app.state.warm_up = BackendWarmUp()  # started, not awaited, at startup
    mount_readiness(app, sessions, sockets, settings.max_sessions, siblings, warm_up)
    install_lifecycle(app, runtime, sessions, sockets, warm_up, owns_runtime=owns_runtime)
    app.add_middleware(BodyLimitMiddleware)  # inside the token check: no body read before it
    if settings.token:
        app.add_middleware(BearerTokenMiddleware, token=settings.token)
    # outermost: another site's page is refused first
    app.add_middleware(RefusingMiddleware, reason=cross_origin)
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
