"""Optional bearer-token check for every route except ``/health``, ``/ready``, the /web page
shell, ``/`` (a redirect to it) and ``/favicon.ico``.

A plain ASGI middleware, so it guards WebSocket handshakes (``/ws``, ``/mcp``)
as well as HTTP requests, before any session is created. OpenEnv clients send
the token with ``headers={"Authorization": "Bearer <token>"}``. Browsers cannot
set headers on a WebSocket, so a WebSocket upgrade (and only that) may pass
``?token=<token>``; the /web page reads its bootstrap ``/web?token=`` itself (the
page shell is open) and sends a header from then on. An HTTP request with only a
query token is refused: query strings end up in logs, proxies and browser history.
Tokens are compared in constant time, and ``redact_tokens_in_logs`` keeps
uvicorn's access and WebSocket log lines from recording one.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
from urllib.parse import parse_qs

OPEN_PATHS = frozenset({"/health", "/ready", "/web", "/web/", "/", "/favicon.ico"})
# The /web page shell and its scripts hold no data; the page asks for the token and sends it
# with every API call and socket, which stay guarded. ``/`` only redirects to /web and
# ``/favicon.ico`` is the page's icon.
OPEN_PREFIXES = ("/web/static/",)


class BearerTokenMiddleware:
    """Reject requests that lack ``Authorization: Bearer <token>`` (401, or close 1008)."""

    def __init__(self, app, token: str) -> None:
        self.app = app
        self._token = token.encode()

    async def __call__(self, scope, receive, send) -> None:
        path = scope.get("path", "")
        if (
            scope["type"] not in ("http", "websocket")
            or path in OPEN_PATHS
            or (scope["type"] == "http" and path.startswith(OPEN_PREFIXES))
        ):
            return await self.app(scope, receive, send)
        if self._authorized(scope):
            return await self.app(scope, receive, send)
        await refuse(
            scope, send, 401, "missing or invalid bearer token", [(b"www-authenticate", b"Bearer")]
        )

    def _authorized(self, scope) -> bool:
        for name, value in scope.get("headers", []):
            if name == b"authorization" and value[:7].lower() == b"bearer ":
                return hmac.compare_digest(value[7:].strip(), self._token)
        if scope["type"] != "websocket":
            return False
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        given = query.get("token", [""])[0].encode()
        return bool(given) and hmac.compare_digest(given, self._token)


async def refuse(
    scope, send, status: int, detail: str, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    """Answer ``scope`` with ``status`` and a JSON ``detail`` before the app sees it; a WebSocket
    handshake is closed with 1008 (policy violation) and ``detail`` as the reason."""
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008, "reason": detail})
        return
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


_TOKEN_IN_QUERY = re.compile(r"(?i)((?:^|[?&\s])token=)[^&\s\"']*")
#: uvicorn logs request lines (``uvicorn.access``) and WebSocket handshakes (``uvicorn.error``) with
#: the query.
LOGGERS = ("uvicorn.access", "uvicorn.error", "uvicorn")


def redact(text: str) -> str:
    """``text`` with the value of every ``token=`` query parameter replaced by ``***``."""
    return _TOKEN_IN_QUERY.sub(r"\1***", text)


class TokenRedactingFilter(logging.Filter):
    """Rewrites a log record's message and string arguments so no ``?token=`` value is written."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and "token=" in record.msg.lower():
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(
                redact(a) if isinstance(a, str) and "token=" in a.lower() else a
                for a in record.args
            )
        elif isinstance(record.args, dict):
            record.args = {
                k: redact(v) if isinstance(v, str) else v for k, v in record.args.items()
            }
        return True


def redact_tokens_in_logs() -> None:
    """Install ``TokenRedactingFilter`` on uvicorn's loggers (idempotent; call after uvicorn
    configured logging)."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, TokenRedactingFilter) for f in logger.filters):
            logger.addFilter(TokenRedactingFilter())
