"""HTTP ``POST /mcp`` that refuses new sessions while the server drains, on any worker.

OpenEnv's route creates a session for ``openenv/session/create`` at any time. Once a
SIGTERM has started the drain (``drain.py``), a new session could only be cut off a
moment later, so it is refused with a JSON-RPC error (``-32000``, the code OpenEnv
uses for capacity) that says why. Every other request goes to OpenEnv's handler
unchanged, so calls on existing sessions finish during the drain.

Under ``serve --workers N`` a request naming a session this worker does not hold
(its client's next connection reached another worker) is passed to the sibling
that holds it (``server/peers.py``) and answered with that sibling's reply.
"""

from __future__ import annotations

import json

from fastapi import FastAPI, Request
from openenv.core.env_server.mcp_types import JsonRpcErrorCode, JsonRpcResponse

from analyst_env.server.peers import Peers
from analyst_env.server.route_wrapping import docs_of, take_post_route
from analyst_env.server.ws_frames import DRAINING_REASON


def _request(body: bytes) -> dict:
    try:
        request = json.loads(body)
    except (ValueError, RecursionError):
        return {}
    return request if isinstance(request, dict) else {}


def _creates_session(request: dict) -> tuple[bool, object]:
    if request.get("method") == "openenv/session/create":
        return True, request.get("id") if isinstance(request.get("id"), (int, str)) else None
    return False, None


def _session_named(request: dict) -> str | None:
    params = request.get("params")
    session_id = params.get("session_id") if isinstance(params, dict) else None
    return session_id if isinstance(session_id, str) and session_id else None


def install_http_mcp(app: FastAPI, is_draining, peers: Peers | None = None) -> None:
    """Wrap OpenEnv's ``POST /mcp`` route of ``app`` so session creation is refused while
    draining, and a session held by a sibling worker is answered by it."""
    route = take_post_route(app, "/mcp")
    if route is None:
        return
    original = route.endpoint

    async def mcp_endpoint(request_raw: Request):
        forwardable = peers is not None and request_raw.query_params.get("local") != "1"
        if is_draining() or forwardable:
            body = await request_raw.body()  # cached by Starlette for OpenEnv's handler
            request = _request(body)  # parsed once here, whatever this wrapper checks
            if is_draining():
                creates, request_id = _creates_session(request)
                if creates:
                    return JsonRpcResponse.error_response(
                        JsonRpcErrorCode.SERVER_ERROR, DRAINING_REASON, request_id=request_id
                    ).model_dump()
            session_id = _session_named(request) if forwardable else None
            if session_id is not None and session_id not in app.state.env_server._sessions:
                assert peers is not None
                holder = await peers.holder_of(session_id)
                reply = await peers.post(holder, "/mcp", body) if holder is not None else None
                if reply is not None:
                    return reply
        return await original(request_raw)

    mcp_endpoint.__doc__ = original.__doc__
    app.add_api_route(
        "/mcp",
        mcp_endpoint,
        methods=["POST"],
        **docs_of(route),
    )
