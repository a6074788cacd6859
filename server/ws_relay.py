"""A client's ``/ws`` socket passed through to the sibling worker that holds its episode.

Under ``serve --workers N`` a reconnecting client (``/ws?episode_id=&resume_secret=``)
reaches whichever worker the kernel hands its new connection to, but its parked
episode lives in the worker that ran it. The resume secret names that worker
(``w<index>-...``, ``server/peers.py``), so the worker reached relays the socket
there, frame for frame in both directions, until either side closes. A client
sees the same protocol as if it had reached the right worker.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import websockets
from fastapi import WebSocket
from openenv.core.env_server.types import WSErrorCode

from analyst_env.server.peers import ASK_TIMEOUT_S, Peers
from analyst_env.server.ws_frames import close, error_frame, send

UNREACHABLE = (
    "the server worker that holds this episode does not answer (it stopped or restarted): "
    "the episode is lost. Reset to start a new episode."
)


async def relay_socket(websocket: WebSocket, peers: Peers, path: Path) -> None:
    """Relay the (accepted) ``websocket`` to the sibling listening at ``path``, same query."""
    query = websocket.url.query
    try:
        sibling = await websockets.unix_connect(
            str(path),
            f"ws://worker/ws?{query}",
            additional_headers=peers.headers,
            open_timeout=ASK_TIMEOUT_S,
            max_size=None,
        )
    except (TimeoutError, OSError, websockets.WebSocketException):
        await send(websocket, error_frame(UNREACHABLE, WSErrorCode.SESSION_ERROR))
        await close(websocket)
        return

    async def up() -> None:  # client -> sibling
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            data = message.get("text")
            await sibling.send(data if data is not None else message.get("bytes") or b"")

    async def down() -> None:  # sibling -> client
        async for message in sibling:
            if isinstance(message, str):
                await websocket.send_text(message)
            else:
                await websocket.send_bytes(message)

    tasks = [asyncio.create_task(up()), asyncio.create_task(down())]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        if tasks[1] in done:  # the sibling closed: pass its close code on
            code = sibling.close_code or 1000
            if code in (1005, 1006, 1015):  # no close frame came (it died): not sendable as such
                await send(websocket, error_frame(UNREACHABLE, WSErrorCode.SESSION_ERROR))
                code = 1011
            await close(websocket, code, sibling.close_reason or "")
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await sibling.close()  # a client gone without a close frame: the sibling parks it again
