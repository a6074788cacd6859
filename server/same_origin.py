"""Refuse what a browser sends on behalf of another site's page (403, or close 1008).

A browser names the page behind a request in its ``Origin`` header: always on a
WebSocket handshake, and on every cross-origin ``fetch`` or form post. WebSockets
are outside the same-origin policy, and a POST that needs no preflight (a
``text/plain`` body) reaches the server whatever CORS says. Without this check,
any site the operator visits could open ``/ws`` on a loopback server without a
token, run code in an episode and read its data, watch every live session on
``/web/api/live/ws``, and drive ``/mcp``. The /web page is served by this
server, so its requests name the server's own host; a client that is not a
browser (OpenEnv's, a trainer's, a sibling worker's relay) sends no ``Origin``
and is not affected. ``Origin: null`` (a sandboxed frame, a ``file:`` page) is
another site too.

A page can also pass for this server by DNS rebinding: its own name, resolved
again to 127.0.0.1, makes its requests same-origin. On a loopback server without
a token, ``serve`` (and the in-process server of a command run without ``--url``)
therefore also refuses a ``Host`` that is a dotted DNS name
(:func:`foreign_host`): such a server is reached as an IP address,
``localhost`` or a one-label name of this machine (``worker``, the name sibling
workers use), never by a name in someone's DNS.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from analyst_env.envs.local.fail_closed import is_loopback
from analyst_env.server.auth import refuse


def _header(scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")
    return None


def cross_origin(scope) -> str | None:
    """Why a request made by another site's page is refused, or None for one this server's own
    page made (its origin's host and port are the ``Host``, or ``X-Forwarded-Host`` that a
    reverse proxy set) and for one with no ``Origin`` at all."""
    origin = _header(scope, b"origin")
    if origin is None:
        return None
    try:
        netloc = urlsplit(origin.strip()).netloc.lower()
    except ValueError:
        netloc = ""
    hosts = {
        h.split(",")[0].strip().lower()
        for h in (_header(scope, b"host"), _header(scope, b"x-forwarded-host"))
        if h
    }
    if netloc and netloc in hosts:
        return None
    return f"cross-origin request refused ({origin[:60]!r} is another site)"


def foreign_host(scope) -> str | None:
    """Why a request whose ``Host`` is a dotted DNS name (other than ``*.localhost``) is
    refused, or None for an IP address, ``localhost`` or a one-label name of this machine."""
    host = _header(scope, b"host") or ""
    refusal = f"host {host[:60]!r} refused: this server answers only on loopback"
    try:
        name = (urlsplit(f"//{host}").hostname or "").rstrip(".")
    except ValueError:  # a malformed Host
        return refusal
    try:
        ipaddress.ip_address(name)
        return None
    except ValueError:  # a name
        pass
    return refusal if "." in name and not name.endswith(".localhost") else None


class RefusingMiddleware:
    """Answer 403 (close 1008 on a WebSocket) to every request ``reason`` gives a reason for."""

    def __init__(self, app, reason: Callable[[Any], str | None]) -> None:
        self.app = app
        self.reason = reason

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] in ("http", "websocket"):
            detail = self.reason(scope)
            if detail is not None:
                return await refuse(scope, send, 403, detail)
        return await self.app(scope, receive, send)


def refuse_rebound_names(app, host: str, token: str | None) -> None:
    """Refuse requests named for a DNS host (:func:`foreign_host`) on ``app`` if it is served
    on a loopback ``host`` without a ``token`` (with one, a rebound page has no token; beyond
    loopback, hosts are named in DNS)."""
    if is_loopback(host) and not token:
        app.add_middleware(RefusingMiddleware, reason=foreign_host)
