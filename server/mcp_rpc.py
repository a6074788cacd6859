"""OpenEnv's MCP JSON-RPC methods, answered on our sessions: one handler for every ``/mcp``.

The ``/mcp`` socket, the ``mcp`` frames of ``/ws`` and HTTP ``POST /mcp`` all answer
through :class:`McpRpc`, which speaks OpenEnv 0.10's protocol response for response
(the same results, error codes and messages):

* ``tools/list`` and ``tools/call`` on the environment's FastMCP server
  (``mcp_bridge.py``), whose tools dispatch like a ``/ws`` step;
* OpenEnv's session methods for HTTP: ``openenv/session/create`` opens a session of
  :class:`~analyst_env.server.sessions.Sessions` and ``openenv/session/close`` ends one;
  a request whose ``params`` name a ``session_id`` runs on that session.

A request with neither a socket's session nor a ``session_id`` runs on a throwaway
environment, closed after the reply, as OpenEnv does.
"""

from __future__ import annotations

import inspect
from typing import Any

from openenv.core.env_server.exceptions import EnvironmentFactoryError, SessionCapacityError
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.mcp_environment import get_server_tools
from openenv.core.env_server.mcp_types import (
    JsonRpcErrorCode,
    JsonRpcRequest,
    JsonRpcResponse,
    McpMethod,
)

from analyst_env.server.sessions import Sessions

CREATE_SESSION = "openenv/session/create"
CLOSE_SESSION = "openenv/session/close"


class McpRpc:
    """Answers one JSON-RPC request, on the socket's session or one its ``params`` name."""

    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions

    async def __call__(
        self,
        request: JsonRpcRequest,
        session_env: Environment | None = None,
        session_id: str | None = None,
    ) -> JsonRpcResponse:
        method, request_id, params = request.method, request.id, request.params
        if not isinstance(params, dict):
            return _error(JsonRpcErrorCode.INVALID_PARAMS, "Params must be an object", request_id)
        if method == CREATE_SESSION:
            return await self._create(session_env, session_id, request_id)
        if method == CLOSE_SESSION:
            return await self._close(params.get("session_id"), session_id, request_id)

        requested = params.get("session_id")
        managed = session_id
        owned_env = False
        if session_env is not None:
            env = session_env
        elif requested:
            try:
                found = self.sessions.lookup(requested)
            except (KeyError, TypeError):
                return _error(
                    JsonRpcErrorCode.INVALID_PARAMS, f"Unknown session_id: {requested}", request_id
                )
            if found is None:
                return _error(
                    JsonRpcErrorCode.INVALID_REQUEST,
                    f"Session {requested} is still initializing; retry shortly",
                    request_id,
                )
            env, managed = found, requested
        else:
            env, owned_env = self.sessions.factory(), True
        try:
            return await _answer(env, method, params, request_id)
        except Exception as exc:
            return _error(JsonRpcErrorCode.INTERNAL_ERROR, str(exc), request_id)
        finally:
            if managed:
                self.sessions.touch(managed)
            if owned_env:
                env.close()

    async def _create(
        self, session_env: Environment | None, session_id: str | None, request_id: Any
    ) -> JsonRpcResponse:
        if session_env is not None and session_id is not None:  # a socket's own session
            return JsonRpcResponse.success(result={"session_id": session_id}, request_id=request_id)
        try:
            created, _ = await self.sessions.open()
        except SessionCapacityError as exc:
            data = {"active_sessions": exc.active_sessions, "max_sessions": exc.max_sessions}
            return _error(JsonRpcErrorCode.SERVER_ERROR, str(exc), request_id, data)
        except EnvironmentFactoryError as exc:
            data = {"factory_name": exc.factory_name}
            return _error(JsonRpcErrorCode.SERVER_ERROR, str(exc), request_id, data)
        return JsonRpcResponse.success(result={"session_id": created}, request_id=request_id)

    async def _close(self, target: Any, session_id: str | None, request_id: Any) -> JsonRpcResponse:
        if not target:
            return _error(
                JsonRpcErrorCode.INVALID_PARAMS,
                "Invalid params - 'session_id' is required",
                request_id,
            )
        if session_id is not None and target == session_id:
            return _error(
                JsonRpcErrorCode.INVALID_REQUEST,
                "Cannot close active WebSocket-managed session via MCP method",
                request_id,
            )
        try:
            outcome = await self.sessions.request_close(target)
        except TypeError:  # an id that cannot be a key (a list, an object)
            outcome = "unknown"
        if outcome == "closing":
            result = {"session_id": target, "closed": False, "closing": True}
            return JsonRpcResponse.success(result=result, request_id=request_id)
        if outcome == "unknown":
            return _error(
                JsonRpcErrorCode.INVALID_PARAMS, f"Unknown session_id: {target}", request_id
            )
        if outcome == "initializing":
            return _error(
                JsonRpcErrorCode.INVALID_REQUEST,
                f"Session {target} is still initializing; retry shortly",
                request_id,
            )
        return JsonRpcResponse.success(
            result={"session_id": target, "closed": True}, request_id=request_id
        )


async def _answer(env: Environment, method: str, params: dict, request_id: Any) -> JsonRpcResponse:
    """``tools/list`` or ``tools/call`` on ``env``'s FastMCP server."""
    if method not in (McpMethod.TOOLS_LIST, McpMethod.TOOLS_CALL):
        return _error(JsonRpcErrorCode.METHOD_NOT_FOUND, f"Method not found: {method}", request_id)
    mcp_server = getattr(env, "mcp_server", None)
    if mcp_server is None:
        return _error(
            JsonRpcErrorCode.INTERNAL_ERROR, "Environment does not support MCP", request_id
        )
    tools = get_server_tools(mcp_server)
    if method == McpMethod.TOOLS_LIST:
        listed = [
            {"name": t.name, "description": t.description or "", "inputSchema": t.parameters or {}}
            for t in tools.values()
        ]
        return JsonRpcResponse.success(result={"tools": listed}, request_id=request_id)
    name, arguments = params.get("name"), params.get("arguments", {})
    if not name:
        return _error(JsonRpcErrorCode.INVALID_PARAMS, "Missing 'name' in params", request_id)
    if name not in tools:  # an unhashable name raises: INTERNAL_ERROR, as in OpenEnv
        return _error(JsonRpcErrorCode.INVALID_PARAMS, f"Tool not found: {name}", request_id)
    if not isinstance(arguments, dict):  # else a TypeError from the call, as an internal error
        return _error(JsonRpcErrorCode.INVALID_PARAMS, "'arguments' must be an object", request_id)
    result = tools[name].fn(**arguments)
    if inspect.isawaitable(result):
        result = await result
    return JsonRpcResponse.success(result=json_safe(result), request_id=request_id)


def json_safe(value: Any) -> Any:
    """``value`` as JSON values: pydantic models dumped, objects as their ``__dict__``, the rest
    as text (OpenEnv's conversion of a tool's result, kept so replies read the same)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if hasattr(value, "__dict__"):
        return {k: json_safe(v) for k, v in value.__dict__.items()}
    return str(value)


def _error(
    code: JsonRpcErrorCode, message: str, request_id: Any, data: Any = None
) -> JsonRpcResponse:
    if data is None:
        return JsonRpcResponse.error_response(code, message, request_id=request_id)
    return JsonRpcResponse.error_response(code, message, request_id=request_id, data=data)
