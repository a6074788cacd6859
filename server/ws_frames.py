"""Reading WebSocket frames and writing error replies, for the ``/ws`` and ``/mcp`` endpoints.

Both endpoints (``ws_endpoint.py``, ``ws_mcp.py``) read a frame with :func:`parse_frame`,
which turns everything that would end OpenEnv's socket (a binary frame, text that is
not JSON, nesting deeper than ``MAX_DEPTH``, an integer too long to convert) into a
:class:`FrameError`, and answer through :func:`send` and :func:`close`, which never
raise for a socket the client already closed. The other helpers build error frames
that echo at most a short piece of what the client sent. The drain's close code and
reason live here too, because every endpoint that refuses a socket while the server
drains (``/ws``, ``/mcp``, HTTP ``/mcp``, the /web live feed) sends them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from fastapi import WebSocket, WebSocketDisconnect
from openenv.core.env_server.types import WSErrorCode, WSErrorResponse
from pydantic import ValidationError

log = logging.getLogger(__name__)

#: Deepest nesting a frame may have. Real frames nest 4-6 levels; the limit keeps
#: validation, serialisation and trajectory recording far from the recursion limit.
MAX_DEPTH = 64
#: Close code for sockets refused while the server drains (RFC 6455 "going away").
DRAINING_CLOSE_CODE = 1001
DRAINING_REASON = "server is shutting down; reconnect to start a new session"
_ECHO_LIMIT = 100  # characters of a client's value echoed back in an error message


class FrameError(Exception):
    """A frame that cannot be read as a JSON object; ``code`` is the ``WSErrorCode`` to answer
    with."""

    def __init__(self, message: str, code: WSErrorCode) -> None:
        super().__init__(message)
        self.code = code


def parse_frame(message: Mapping[str, Any]) -> Any:
    """The JSON value of one received ASGI WebSocket message.

    Raises:
        FrameError: A binary frame, text that is not JSON, nesting deeper than
            ``MAX_DEPTH`` or an integer too long to convert (``INVALID_JSON``).
    """
    text = message.get("text")
    if text is None:
        raise FrameError(
            "Invalid JSON: binary frames are not accepted; send JSON text frames",
            WSErrorCode.INVALID_JSON,
        )
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FrameError(f"Invalid JSON: {exc}", WSErrorCode.INVALID_JSON) from None
    except RecursionError:
        raise FrameError(
            f"Invalid JSON: nested deeper than {MAX_DEPTH} levels", WSErrorCode.INVALID_JSON
        ) from None
    except ValueError as exc:  # an integer of more than sys.get_int_max_str_digits() digits
        raise FrameError(f"Invalid JSON: {exc}", WSErrorCode.INVALID_JSON) from None
    if _depth_exceeds(value, MAX_DEPTH):
        raise FrameError(
            f"Invalid JSON: nested deeper than {MAX_DEPTH} levels", WSErrorCode.INVALID_JSON
        )
    return value


def _depth_exceeds(value: Any, limit: int) -> bool:
    """True if ``value`` nests lists/objects more than ``limit`` levels deep (iterative: no
    recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend(
                (child, depth + 1) for child in children if isinstance(child, (list, dict))
            )
    return False


def short(value: Any) -> str:
    """``value`` as text, cut to ``_ECHO_LIMIT`` characters for an error message."""
    text = str(value)
    return text if len(text) <= _ECHO_LIMIT else text[:_ECHO_LIMIT] + "..."


def short_errors(exc: ValidationError) -> str:
    """pydantic's error text, cut to 2000 characters (for a JSON-RPC error message)."""
    text = str(exc)
    return text if len(text) <= 2000 else text[:2000] + "..."


def validation_errors(exc: ValidationError) -> list[dict[str, Any]]:
    """pydantic's errors as JSON values, inputs cut short (an error frame must not echo 100 MB)."""
    errors = json.loads(exc.json(include_url=False))
    for err in errors:
        if "input" in err and len(json.dumps(err["input"])) > 1000:
            err["input"] = short(json.dumps(err["input"]))
    return errors


def error_frame(message: str, code: WSErrorCode, **extra: Any) -> str:
    """A ``/ws`` error frame: ``message``, ``code`` and any ``extra`` fields in its data."""
    return WSErrorResponse(data={"message": message, "code": code, **extra}).model_dump_json()


async def send(websocket: WebSocket, text: str) -> bool:
    """Send one frame; False if the client is gone (never raises for a closed socket)."""
    try:
        await websocket.send_text(text)
        return True
    except (WebSocketDisconnect, RuntimeError, OSError):
        return False
    except Exception as exc:  # websockets' ConnectionClosed and similar transport errors
        log.debug("send failed: %s", exc)
        return False


async def close(websocket: WebSocket, code: int = 1000, reason: str = "") -> None:
    """Close the socket, ignoring a socket that is already closed."""
    try:
        await websocket.close(code=code, reason=reason)
    except Exception:
        pass
