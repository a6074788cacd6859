"""A cap on HTTP request bodies, the counterpart of the cap on one WebSocket frame.

uvicorn refuses a ``/ws`` frame over ``ws_max_size`` but reads an HTTP body of
any size, and every route here (``/reset``, ``/step``, ``/mcp``, ``/envs``) takes
its JSON whole: one request of a few gigabytes would hold that memory several
times over while it is parsed, and the server, with every episode in it, would
be killed for memory. A body larger than :data:`MAX_MESSAGE_BYTES` is answered
413 before it is read (its ``Content-Length``) or as soon as it passes the cap
(a chunked body, buffered here up to the cap and then handed on).
"""

from __future__ import annotations

from analyst_env.server.auth import refuse

MAX_MESSAGE_BYTES = 100 * 2**20
"""The largest HTTP body, and the largest ``/ws`` frame (uvicorn's ``ws_max_size``)."""


def _declared_length(scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            return int(value)  # uvicorn has refused a Content-Length that is not a number
    return None


class BodyLimitMiddleware:
    """Answer 413 to a request whose body is over ``limit`` bytes."""

    def __init__(self, app, limit: int = MAX_MESSAGE_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        detail = f"request body over {self.limit} bytes"
        declared = _declared_length(scope)
        if declared is not None:
            if declared > self.limit:
                return await refuse(scope, send, 413, detail)
            return await self.app(scope, receive, send)
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before its body ended
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.limit:
                return await refuse(scope, send, 413, detail)
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay():
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        return await self.app(scope, replay, send)
