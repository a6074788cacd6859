"""A step's action, read the same way over ``/ws`` and HTTP ``POST /step``.

OpenEnv's ``deserialize_action`` looks the action's ``type`` up in a dict before it
validates anything, so a ``type`` that is an object or a list raised ``TypeError``:
over ``/ws`` an error frame saying ``unhashable type: 'dict'``, over HTTP a bare 500.
:func:`read_action` refuses it first, with a message that says what ``type`` may be;
:func:`install_http_step` puts that check in front of OpenEnv's ``/step`` route (422).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, HTTPException
from openenv.core.env_server.serialization import deserialize_action
from openenv.core.env_server.types import Action, StepRequest, StepResponse

from analyst_env.server.route_wrapping import replace_post_route

ACTION_TYPES = ("call_tool", "list_tools")


class ActionError(ValueError):
    """An action OpenEnv's deserializer cannot even look at (``VALIDATION_ERROR``, 422)."""


def check_action(data: Any) -> None:
    """Raise ``ActionError`` for an action that is not an object or whose ``type`` is no
    string."""
    if not isinstance(data, dict):
        raise ActionError("a step's action must be a JSON object")
    kind = data.get("type")
    if kind is not None and not isinstance(kind, str):
        raise ActionError(f"the action's 'type' must be a string: one of {', '.join(ACTION_TYPES)}")


def read_action(data: Any, action_cls: type[Action]) -> Action:
    """The action of a step frame (pydantic's ``ValidationError`` for invalid fields)."""
    check_action(data)
    return deserialize_action(data, action_cls)


def install_http_step(app: FastAPI) -> None:
    """Wrap OpenEnv's ``POST /step`` route of ``app`` (same path, body and response model)."""

    def wrap(original):
        async def step(request: StepRequest) -> StepResponse:
            try:
                check_action(request.action)
            except ActionError as exc:
                raise HTTPException(422, str(exc)) from None
            return await original(request)

        return step

    replace_post_route(app, "/step", wrap, response_model=StepResponse)
