"""Optional bearer-token check for every route except ``/health`` and the /web page shell.

A plain ASGI middleware, so it guards WebSocket handshakes (``/ws``, ``/mcp``)
as well as HTTP requests, before any session is created. OpenEnv clients send
the token with ``headers={"Authorization": "Bearer <token>"}``; browsers, which
cannot set WebSocket headers, may pass ``?token=<token>`` instead.
"""

from __future__ import annotations

import hmac
import json
from urllib.parse import parse_qs

OPEN_PATHS = frozenset({"/health", "/web", "/web/"})
# The /web page shell and its scripts hold no data; the page asks for the token and sends it
# with every API call and socket, which stay guarded.
OPEN_PREFIXES = ("/web/static/",)


class BearerTokenMiddleware:
    """Reject requests that lack ``Authorization: Bearer <token>`` (401, or close 1008)."""

    def __init__(self, app, token: str) -> None:
        self.app = app
        self._token = token.encode()

    async def __call__(self, scope, receive, send) -> None:
        path = scope.get("path", "")
        if scope["type"] not in ("http", "websocket") or path in OPEN_PATHS or (
            scope["type"] == "http" and path.startswith(OPEN_PREFIXES)
        ):
            return await self.app(scope, receive, send)
        if self._authorized(scope):
            return await self.app(scope, receive, send)
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": "missing or invalid bearer token"})
            return
        body = json.dumps({"detail": "missing or invalid bearer token"}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"www-authenticate", b"Bearer"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    def _authorized(self, scope) -> bool:
        for name, value in scope.get("headers", []):
            if name == b"authorization" and value[:7].lower() == b"bearer ":
                return hmac.compare_digest(value[7:].strip(), self._token)
        query = parse_qs(scope.get("query_string", b"").decode())
        given = query.get("token", [""])[0].encode()
        return bool(given) and hmac.compare_digest(given, self._token)
