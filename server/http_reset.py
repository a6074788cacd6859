"""HTTP ``POST /reset`` with the reset's own errors as 4xx, not a bare 500.

OpenEnv's handler lets every exception of ``reset`` become ``500 Internal Server
Error``. Over ``/ws`` the same errors are ``EXECUTION_ERROR`` frames whose message
says what to fix; here they keep that message as ``detail`` and get a status that
says whose fault it is: 422 for invalid options (unknown option, negative index,
conflicting choices), 404 for a task, split, index or sandbox environment that
does not exist, 409 for an environment whose image is not built, 503 while the
server drains. Anything else stays a 500.
"""

from __future__ import annotations

from fastapi import Body, FastAPI, HTTPException
from fastapi.routing import APIRoute
from openenv.core.env_server.types import ResetRequest, ResetResponse

from analyst_env.envs.recipes.service import EnvironmentNotReady
from analyst_env.server.environment import SessionClosed


def reset_status(exc: BaseException) -> int | None:
    """The HTTP status for an exception of ``reset``, or None for a server fault."""
    if isinstance(exc, (KeyError, IndexError)):  # TaskNotFoundError, UnknownEnvironment, index past the end
        return 404
    if isinstance(exc, EnvironmentNotReady):
        return 409
    if isinstance(exc, SessionClosed):
        return 503
    if isinstance(exc, ValueError):
        return 422
    return None


def install_http_reset(app: FastAPI, is_draining=lambda: False) -> None:
    """Wrap OpenEnv's ``POST /reset`` route of ``app`` (same path, body and response model)."""
    route = next((r for r in app.router.routes if isinstance(r, APIRoute) and r.path == "/reset"), None)
    if route is None:  # production mode: no simulation routes
        return
    original = route.endpoint
    app.router.routes.remove(route)

    async def reset(request: ResetRequest = Body(default_factory=ResetRequest)) -> ResetResponse:
        if is_draining():
            raise HTTPException(503, "server is shutting down")
        try:
            return await original(request)
        except Exception as exc:
            status = reset_status(exc)
            if status is None:
                raise
            raise HTTPException(status, str(exc)) from None

    app.add_api_route(
        "/reset", reset, methods=["POST"], response_model=ResetResponse, tags=route.tags,
        summary=route.summary, description=route.description,
        responses={404: {"description": "No such task, split, index or environment"},
                   409: {"description": "The sandbox environment's image is not ready"},
                   422: {"description": "Invalid reset options"}},
    )
