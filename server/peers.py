"""The other workers of ``serve --workers N``, so that the /web live view shows the whole server.

Each worker holds its own sessions (``server/live.py``'s hub is in-process). A
viewer's connection reaches one worker, so that worker asks the others: every
worker also listens on a Unix socket ``w<index>.sock`` in a directory the
supervisor creates for its workers alone (mode 0700, removed on exit; kernels
never see it: it is not in their root view). The same app answers there, so a
peer speaks the live feed's own protocol, asked with ``local=1`` (its own sessions
only, no asking further).

Live session ids and resume secrets carry their worker (``w1-s7``, ``w1-<secret>``):
a viewer opening one session, or a client resuming an episode, is relayed to the
worker that holds it. Session ids (``sessions.py``; HTTP ``/mcp`` sessions, which a
socket may attach to with ``/ws?session_id=``) are plain UUIDs, so a worker that
does not hold one asks its siblings which does. A worker that is gone (or not
started yet) is left out, never an error.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import websockets

DIR_ENV = "ANALYST_ENV_WORKER_PEERS"
"""The directory of the workers' Unix sockets (set by the supervisor)."""
INDEX_ENV = "ANALYST_ENV_WORKER_INDEX"
"""This worker's number, 0 .. N-1 (set by the supervisor)."""
COUNT_ENV = "ANALYST_ENV_WORKER_COUNT"
"""How many workers the supervisor started."""
ASK_TIMEOUT_S = 3.0
HOLDS_ROUTE = "/_workers/sessions"
"""``GET {HOLDS_ROUTE}/<session id>``: ``{"held": bool}``, answered to siblings only."""


def session_prefix() -> str:
    """What this process's live session ids start with (``w<index>-`` in a worker, else empty)."""
    index = os.environ.get(INDEX_ENV)
    return f"w{index}-" if index is not None and os.environ.get(DIR_ENV) else ""


@dataclass
class Peers:
    """This worker's siblings, reached over their Unix sockets.

    Args:
        directory: Where every worker's ``w<index>.sock`` is.
        index: This worker's number.
        count: How many workers there are.
        headers: Sent with every request to a sibling (the server's bearer token).
    """

    directory: Path
    index: int
    count: int
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls, token: str | None = None) -> Peers | None:
        """The peers of this process, if it is a worker of ``serve --workers N`` (N > 1)."""
        directory, index = os.environ.get(DIR_ENV), os.environ.get(INDEX_ENV)
        count = int(os.environ.get(COUNT_ENV) or 0)
        if not directory or index is None or count < 2:
            return None
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return cls(Path(directory), int(index), count, headers)

    def path(self, index: int) -> Path:
        return self.directory / f"w{index}.sock"

    def listen(self) -> socket.socket:
        """This worker's own socket, bound and listening, for uvicorn to serve the app on."""
        path = self.path(self.index)
        path.unlink(missing_ok=True)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(path))
        sock.listen(64)
        return sock

    def others(self) -> list[Path]:
        return [self.path(i) for i in range(self.count) if i != self.index]

    def owner(self, session_id: str) -> Path | None:
        """The socket of the sibling that holds ``session_id`` (None: this worker, or nobody)."""
        head, _, rest = session_id.partition("-")
        if not rest or not head.startswith("w") or not head[1:].isdigit():
            return None
        index = int(head[1:])
        return self.path(index) if index != self.index and index < self.count else None

    async def sessions(self) -> list[dict[str, Any]]:
        """Every sibling's live sessions (a sibling that does not answer is left out)."""
        replies = await self.ask("/web/api/live")
        return [s for reply in replies for s in reply.get("sessions", [])]

    async def ask(self, route: str) -> list[dict[str, Any]]:
        """Every answering sibling's JSON reply to ``GET route?local=1`` (503s included)."""
        replies = await asyncio.gather(*(self._get(p, route) for p in self.others()))
        return [r for r in replies if r is not None]

    async def holder_of(self, session_id: str) -> Path | None:
        """The sibling whose session registry holds ``session_id`` (an HTTP ``/mcp`` session,
        or one a socket attaches to with ``/ws?session_id=``), if any."""
        for path in self.others():
            reply = await self._get(path, f"{HOLDS_ROUTE}/{quote(session_id, safe='')}")
            if reply is not None and reply.get("held") is True:
                return path
        return None

    async def post(self, path: Path, route: str, body: bytes) -> dict[str, Any] | None:
        """A sibling's JSON reply to ``POST route?local=1`` with ``body`` (None if it is gone)."""
        return await self._request(path, "POST", route, body)

    async def _get(self, path: Path, route: str) -> dict[str, Any] | None:
        return await self._request(path, "GET", route, None)

    async def _request(
        self, path: Path, method: str, route: str, body: bytes | None
    ) -> dict[str, Any] | None:
        transport = httpx.AsyncHTTPTransport(uds=str(path))
        headers = {**self.headers, "Content-Type": "application/json"} if body else self.headers
        try:
            async with httpx.AsyncClient(
                transport=transport, base_url="http://worker", headers=headers
            ) as client:
                reply = await client.request(
                    method, route, params={"local": "1"}, content=body, timeout=ASK_TIMEOUT_S
                )
                answer = reply.json()
                return answer if isinstance(answer, dict) else None
        except (httpx.HTTPError, OSError, ValueError):
            return None

    async def feed(self, path: Path, session: str | None = None) -> AsyncIterator[dict[str, Any]]:
        """A sibling's live feed (its own sessions), message by message, until it ends."""
        query = "local=1" + (f"&session={quote(session)}" if session is not None else "")
        try:
            async with websockets.unix_connect(
                str(path),
                f"ws://worker/web/api/live/ws?{query}",
                additional_headers=self.headers,
                open_timeout=ASK_TIMEOUT_S,
                max_size=None,
            ) as ws:
                async for message in ws:
                    yield json.loads(message)
        except (TimeoutError, OSError, websockets.WebSocketException, ValueError):
            return


def from_sibling(scope: Mapping[str, Any]) -> bool:
    """Whether a request came over a worker's Unix socket (uvicorn gives it no client address)."""
    return scope.get("client") is None
