"""HTTP ``POST /reset`` with the reset's own errors as 4xx, not a bare 500.

OpenEnv's handler lets every exception of ``reset`` become ``500 Internal Server
Error``. Over ``/ws`` the same errors are ``EXECUTION_ERROR`` frames whose message
says what to fix; here they keep that message as ``detail`` and get a status that
says whose fault it is: 422 for invalid options (unknown option, negative index,
conflicting choices), 404 for a task, split, index or sandbox environment that
does not exist, 409 for an environment whose image is not built, 503 while the
server drains. Anything else stays a 500.

OpenEnv's stateless reset also builds its environment (here: a sandbox) outside any
session, so a burst of HTTP resets could start more sandboxes than ``--max-sessions``
allows. Each HTTP reset here holds a slot of the server's sessions (``sessions.py``)
while it runs, and a reset that finds every slot taken is refused with 503 and says so.
"""

from __future__ import annotations

from typing import Any

from fastapi import Body, FastAPI, HTTPException
from openenv.core.env_server.exceptions import SessionCapacityError
from openenv.core.env_server.types import ResetRequest, ResetResponse
from pydantic import ConfigDict

from analyst_env.envs.recipes.service import EnvironmentNotReady
from analyst_env.server.reset_options import ResetOptions
from analyst_env.server.route_wrapping import replace_post_route
from analyst_env.server.sessions import Sessions
from analyst_env.server.tool_dispatch import SessionClosed


def _document_options(schema: dict[str, Any]) -> None:
    """The body's schema lists the options ``reset`` takes, and no others: an unknown one is
    refused with 422 (by ``ResetOptions``, with the message ``/ws`` gives)."""
    options = ResetOptions.model_json_schema()["properties"]
    nested = {"type": "object", "properties": options, "additionalProperties": False}
    schema["properties"] = {
        **options,
        "options": {
            "anyOf": [nested, {"type": "null"}],
            "description": "The same options, nested as Gymnasium's reset(options=...) nests"
            " them; one given here and at the top must have the same value",
        },
    }
    schema["additionalProperties"] = False


class ResetBody(ResetRequest):
    """``POST /reset``'s body: OpenEnv's ``ResetRequest`` with the accepted options documented.

    Every option, ``seed`` too, reaches ``reset`` as sent and is checked there by
    ``ResetOptions``: the same message as over ``/ws``, and JSON's ``false`` is not seed 0
    (``ResetRequest`` would have read it so).
    """

    model_config = ConfigDict(json_schema_extra=_document_options)

    seed: Any = None


def reset_status(exc: BaseException) -> int | None:
    """The HTTP status for an exception of ``reset``, or None for a server fault."""
    if isinstance(
        exc, (KeyError, IndexError)
    ):  # TaskNotFoundError, UnknownEnvironment, index past the end
        return 404
    if isinstance(exc, EnvironmentNotReady):
        return 409
    if isinstance(exc, SessionClosed):
        return 503
    if isinstance(exc, ValueError):
        return 422
    return None


RESET_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"description": "No such task, split, index or environment"},
    409: {"description": "The sandbox environment's image is not ready"},
    422: {"description": "Invalid reset options"},
    503: {"description": "Every --max-sessions slot is taken, or the server drains"},
}


def install_http_reset(app: FastAPI, sessions: Sessions, is_draining=lambda: False) -> None:
    """Wrap OpenEnv's ``POST /reset`` route of ``app`` (same path, body and response model); each
    reset holds a slot of ``sessions`` while it runs."""

    def wrap(original):
        # B008: FastAPI reads a Body() default as the declaration (as in OpenEnv's own route).
        async def reset(request: ResetBody = Body(default_factory=ResetBody)) -> ResetResponse:  # noqa: B008
            if is_draining():
                raise HTTPException(503, "server is shutting down")
            try:
                async with sessions.reserve():
                    return await original(request)
            except HTTPException:
                raise
            except SessionCapacityError as exc:
                raise HTTPException(
                    503,
                    f"server at capacity: {exc.active_sessions} of {exc.max_sessions} sessions "
                    "are in use (--max-sessions); retry later",
                ) from None
            except Exception as exc:
                status = reset_status(exc)
                if status is None:
                    raise
                raise HTTPException(status, str(exc)) from None

        return reset

    replace_post_route(app, "/reset", wrap, response_model=ResetResponse, responses=RESET_ERRORS)
