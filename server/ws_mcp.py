"""The ``/mcp`` WebSocket endpoint: JSON-RPC 2.0 over a socket, one session per socket.

Split from ``ws_endpoint.py``, whose ``SessionSockets`` owns the state both endpoints
share (the sessions of ``sessions.py``, the drain's flag and counters, the open
sockets) and holds one :class:`McpEndpoint` built over itself. The endpoint reaches
that state only through :class:`SharedSockets`, so it depends on what it uses rather
than on the ``/ws`` session loop. Like ``/ws``, it answers every malformed frame (with
a JSON-RPC error response) and goes on with the next one. Requests are answered by
``mcp_rpc.McpRpc`` (through :meth:`McpEndpoint.rpc`, which is also what ``/ws`` calls
for its ``mcp`` frames).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from contextlib import AsyncExitStack
from typing import Any, Protocol

from fastapi import WebSocket, WebSocketDisconnect
from openenv.core.env_server.exceptions import EnvironmentFactoryError, SessionCapacityError
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.mcp_types import JsonRpcErrorCode, JsonRpcRequest, JsonRpcResponse
from pydantic import ValidationError

from analyst_env.server.mcp_rpc import McpRpc
from analyst_env.server.sessions import Sessions
from analyst_env.server.ws_frames import (
    DRAINING_CLOSE_CODE,
    DRAINING_REASON,
    FrameError,
    close,
    parse_frame,
    send,
    short_errors,
)


class SharedSockets(Protocol):
    """What ``/mcp`` shares with ``/ws`` (``ws_endpoint.SessionSockets`` provides it)."""

    sessions: Sessions
    draining: bool
    in_flight: int  # frames being handled now, on either endpoint
    sockets: set[WebSocket]


class McpEndpoint:
    """OpenEnv's ``/mcp`` WebSocket on the sessions and drain state of ``shared``, answering
    through ``handler``."""

    def __init__(self, shared: SharedSockets, handler: McpRpc) -> None:
        self.shared = shared
        self.handler = handler

    async def serve(self, websocket: WebSocket) -> None:
        """OpenEnv's ``/mcp`` WebSocket: JSON-RPC 2.0 requests in, responses out; bad ones get an
        error response."""
        shared = self.shared
        await websocket.accept()
        if shared.draining:
            await send(
                websocket,
                JsonRpcResponse.error_response(
                    JsonRpcErrorCode.SERVER_ERROR, DRAINING_REASON
                ).model_dump_json(),
            )
            await close(websocket, DRAINING_CLOSE_CODE, DRAINING_REASON)
            return
        session_id = None
        shared.sockets.add(websocket)
        try:
            try:
                session_id, env = await shared.sessions.open(attach=True)
            except SessionCapacityError as exc:
                await send(
                    websocket,
                    JsonRpcResponse.error_response(
                        JsonRpcErrorCode.SERVER_ERROR,
                        str(exc),
                        data={
                            "active_sessions": exc.active_sessions,
                            "max_sessions": exc.max_sessions,
                        },
                    ).model_dump_json(),
                )
                return
            except EnvironmentFactoryError as exc:
                await send(
                    websocket,
                    JsonRpcResponse.error_response(
                        JsonRpcErrorCode.SERVER_ERROR,
                        str(exc),
                        data={"factory_name": exc.factory_name},
                    ).model_dump_json(),
                )
                return
            except Exception as exc:
                await send(
                    websocket,
                    JsonRpcResponse.error_response(
                        JsonRpcErrorCode.SERVER_ERROR, str(exc)
                    ).model_dump_json(),
                )
                return
            async with AsyncExitStack() as stack:
                mcp_session = getattr(env, "mcp_session", None)
                if callable(mcp_session):
                    await stack.enter_async_context(mcp_session())
                while True:
                    message = await websocket.receive()
                    if message["type"] == "websocket.disconnect":
                        break
                    shared.in_flight += 1
                    try:
                        reply = await self._frame(message, env, session_id)
                    finally:
                        shared.in_flight -= 1
                    if not await send(websocket, reply):
                        break
        except WebSocketDisconnect:
            pass
        finally:
            shared.sockets.discard(websocket)
            if session_id is not None:
                await shared.sessions.release(session_id, owned=True)
            await close(websocket)

    async def rpc(
        self, request: JsonRpcRequest, env: Environment, session_id: str
    ) -> JsonRpcResponse:
        """The handler's response to ``request``; an ``INTERNAL_ERROR`` response if it raises."""
        try:
            return await self.handler(request, session_env=env, session_id=session_id)
        except Exception as exc:
            return JsonRpcResponse.error_response(
                JsonRpcErrorCode.INTERNAL_ERROR, str(exc), request_id=request.id
            )

    async def _frame(
        self, message: MutableMapping[str, Any], env: Environment, session_id: str
    ) -> str:
        try:
            value = parse_frame(message)
        except FrameError as exc:
            text = str(exc).removeprefix("Invalid JSON: ")
            return JsonRpcResponse.error_response(
                JsonRpcErrorCode.PARSE_ERROR, f"Parse error: {text}"
            ).model_dump_json()
        if not isinstance(value, dict):
            return JsonRpcResponse.error_response(
                JsonRpcErrorCode.INVALID_REQUEST,
                f"Invalid request: a request must be a JSON object, got {type(value).__name__}",
            ).model_dump_json()
        try:
            request = JsonRpcRequest(**value)
        except ValidationError as exc:
            return JsonRpcResponse.error_response(
                JsonRpcErrorCode.INVALID_REQUEST, f"Invalid request: {short_errors(exc)}"
            ).model_dump_json()
        except TypeError as exc:  # keys that are not identifiers cannot be keyword arguments
            return JsonRpcResponse.error_response(
                JsonRpcErrorCode.INVALID_REQUEST, f"Invalid request: {exc}"
            ).model_dump_json()
        response = await self.rpc(request, env, session_id)
        try:
            return response.model_dump_json()
        except Exception as exc:
            return JsonRpcResponse.error_response(
                JsonRpcErrorCode.INTERNAL_ERROR, str(exc), request_id=request.id
            ).model_dump_json()
