"""HTTP ``POST /mcp``: OpenEnv's JSON-RPC route, answered on our sessions (``mcp_rpc.py``).

The body is read as OpenEnv 0.10 reads it (a parse error or an invalid request gets the
same JSON-RPC error), then answered by :class:`~analyst_env.server.mcp_rpc.McpRpc`. Two
things differ:

* Once a SIGTERM has started the drain (``drain.py``), a new session could only be cut
  off a moment later, so ``openenv/session/create`` is refused with a JSON-RPC error
  (``-32000``, the code OpenEnv uses for capacity) that says why. Every other request is
  answered, so calls on existing sessions finish during the drain.
* Under ``serve --workers N`` a request naming a session this worker does not hold (its
  client's next connection reached another worker) is passed to the sibling that holds
  it (``server/peers.py``) and answered with that sibling's reply.
"""

from __future__ import annotations

import json

from fastapi import FastAPI, Request
from openenv.core.env_server.mcp_types import JsonRpcErrorCode, JsonRpcRequest, JsonRpcResponse
from pydantic import ValidationError

from analyst_env.server.mcp_rpc import CREATE_SESSION, McpRpc
from analyst_env.server.peers import Peers
from analyst_env.server.route_wrapping import replace_post_route
from analyst_env.server.sessions import Sessions
from analyst_env.server.ws_frames import DRAINING_REASON


def _request(body: bytes) -> dict:
    try:
        request = json.loads(body)
    except (ValueError, RecursionError):
        return {}
    return request if isinstance(request, dict) else {}


def _creates_session(request: dict) -> tuple[bool, object]:
    if request.get("method") == CREATE_SESSION:
        return True, request.get("id") if isinstance(request.get("id"), (int, str)) else None
    return False, None


def _session_named(request: dict) -> str | None:
    params = request.get("params")
    session_id = params.get("session_id") if isinstance(params, dict) else None
    return session_id if isinstance(session_id, str) and session_id else None


def _read(body: bytes) -> JsonRpcRequest | JsonRpcResponse:
    """The request in ``body``, or the error response OpenEnv gives for it."""
    try:
        return JsonRpcRequest(**json.loads(body))
    except json.JSONDecodeError:
        return JsonRpcResponse.error_response(JsonRpcErrorCode.PARSE_ERROR)
    except ValidationError as exc:
        return JsonRpcResponse.error_response(
            JsonRpcErrorCode.INVALID_REQUEST, f"Invalid request: {exc}"
        )
    except Exception:
        return JsonRpcResponse.error_response(JsonRpcErrorCode.PARSE_ERROR)


def install_http_mcp(
    app: FastAPI, sessions: Sessions, rpc: McpRpc, is_draining, peers: Peers | None = None
) -> None:
    """Serve ``POST /mcp`` of ``app`` with ``rpc`` in place of OpenEnv's handler (same path and
    documentation)."""

    def wrap(_openenv_endpoint):
        async def mcp_endpoint(request_raw: Request):
            body = await request_raw.body()
            forwardable = peers is not None and request_raw.query_params.get("local") != "1"
            if is_draining() or forwardable:
                request = _request(body)  # parsed once here, whatever this route checks
                if is_draining():
                    creates, request_id = _creates_session(request)
                    if creates:
                        return JsonRpcResponse.error_response(
                            JsonRpcErrorCode.SERVER_ERROR, DRAINING_REASON, request_id=request_id
                        ).model_dump()
                session_id = _session_named(request) if forwardable else None
                if session_id is not None and session_id not in sessions:
                    assert peers is not None
                    holder = await peers.holder_of(session_id)
                    reply = await peers.post(holder, "/mcp", body) if holder is not None else None
                    if reply is not None:
                        return reply
            read = _read(body)
            if isinstance(read, JsonRpcResponse):
                return read.model_dump()
            return (await rpc(read)).model_dump()

        return mcp_endpoint

    replace_post_route(app, "/mcp", wrap)
