"""The live feed of /web: a WebSocket per viewer, fed by ``server/live.py``'s hub.

``/web/api/live/ws`` pushes the session list as it changes;
``/web/api/live/ws?session=<id>`` pushes one session's history and then each
event as it happens. The feed is read-only: the socket accepts nothing from
the viewer, so watching a trainer's session can never disturb it.

Under ``serve --workers N`` each worker holds its own sessions; the list merges
every worker's (``server/peers.py``) and a session held by another worker is
relayed from it. ``local=1`` asks for this worker's own sessions only (what the
workers ask each other).

Events hold the hub's references to observations and cells; they become JSON
here, on the viewer's side, with the base64 of image blocks dropped from
observations (the cell carries each plot once).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fastapi import APIRouter, WebSocket, WebSocketDisconnect

from analyst_env.server.live import LiveHub, Subscriber
from analyst_env.server.peers import ASK_TIMEOUT_S, Peers
from analyst_env.server.ws_frames import DRAINING_CLOSE_CODE, DRAINING_REASON

HEARTBEAT_S = 15.0


def _plain(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    return value


def _observation(observation: Any) -> Any:
    data = _plain(observation)
    if not isinstance(data, dict):
        return data
    data = dict(data)
    data.pop("available_tools", None)
    result = data.get("result")
    if isinstance(result, dict) and isinstance(result.get("content"), list):
        blocks = [
            {"type": "image", "omitted": True}
            if isinstance(b, dict) and b.get("type") == "image"
            else b
            for b in result["content"]
        ]
        data["result"] = {**result, "content": blocks}
    return data


def event_json(event: dict[str, Any]) -> dict[str, Any]:
    """One hub event as plain JSON data."""
    out = dict(event)
    if "observation" in out:
        out["observation"] = _observation(out["observation"])
    if out.get("cell") is not None:
        out["cell"] = _plain(out["cell"])
    return out


def _newest_first(sessions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(sessions, key=lambda s: s.get("started_at") or 0.0, reverse=True)


def live_router(hub: LiveHub, peers: Peers | None = None) -> APIRouter:
    """Routes of the live feed for one server's hub (and its sibling workers', if any)."""
    router = APIRouter()

    @router.get("/web/api/live")
    async def live_sessions(local: bool = False) -> dict:
        """Sessions running now and the last few finished ones, newest first."""
        if peers is None or local:
            return {"sessions": hub.sessions()}
        return {"sessions": _newest_first(hub.sessions() + await peers.sessions())}

    @router.websocket("/web/api/live/ws")
    async def live_feed(
        websocket: WebSocket, session: str | None = None, local: bool = False
    ) -> None:
        await websocket.accept()
        relay = peers if not local else None
        # The drain's socket set: a viewer is refused while the server drains, and its
        # feed is closed with 1001 when the drain closes the sockets.
        sockets = getattr(websocket.app.state, "sockets", None)
        if sockets is not None and sockets.draining:
            await websocket.close(code=DRAINING_CLOSE_CODE, reason=DRAINING_REASON)
            return
        if sockets is not None:
            sockets.sockets.add(websocket)
        owner = relay.owner(session) if relay is not None and session is not None else None
        if relay is not None and owner is not None:
            try:
                await _relay_session(websocket, relay, owner, session or "")
            finally:
                if sockets is not None:
                    sockets.sockets.discard(websocket)
            return
        sub, snapshot = hub.subscribe(session)
        siblings: list[asyncio.Task] = []
        try:
            if session is None:
                listing = dict(snapshot or {})
                if relay is not None:
                    theirs, siblings = await _follow_siblings(relay, sub)
                    listing["sessions"] = _newest_first(listing.get("sessions", []) + theirs)
                await websocket.send_text(json.dumps({"type": "sessions", **listing}, default=str))
            elif snapshot is None:
                await _no_session(websocket, session, "it ended long ago or never existed")
                await websocket.close(code=1000)
                return
            else:
                events = [event_json(e) for e in snapshot["events"]]
                await websocket.send_text(
                    json.dumps(
                        {"type": "history", "session": snapshot["session"], "events": events},
                        default=str,
                    )
                )
            receiver = asyncio.create_task(_drain(websocket))
            try:
                while True:
                    item: dict[str, Any] | None
                    getter = asyncio.ensure_future(sub.queue.get())
                    done, _ = await asyncio.wait(
                        {getter, receiver}, timeout=HEARTBEAT_S, return_when=asyncio.FIRST_COMPLETED
                    )
                    if getter not in done:
                        getter.cancel()
                        if receiver in done:  # the viewer left
                            return
                        item = {"type": "ping"}
                    else:
                        item = sub.resolve(getter.result())
                    if item is None:
                        await websocket.close(code=1013, reason="viewer fell behind; reconnect")
                        return
                    if item.get("type") == "event":
                        item = {**item, "event": event_json(item["event"])}
                    await websocket.send_text(json.dumps(item, default=str))
            finally:
                receiver.cancel()
        except (WebSocketDisconnect, RuntimeError):
            pass
        finally:
            for task in siblings:
                task.cancel()
            hub.unsubscribe(sub)
            if sockets is not None:
                sockets.sockets.discard(websocket)

    return router


async def _follow_siblings(
    peers: Peers, sub: Subscriber
) -> tuple[list[dict[str, Any]], list[asyncio.Task]]:
    """Every sibling's session list now, and tasks that feed their updates into ``sub``."""
    loop = asyncio.get_running_loop()
    firsts: list[asyncio.Future] = []

    async def follow(path, first: asyncio.Future) -> None:
        try:
            async for message in peers.feed(path):
                if not first.done():
                    first.set_result(list(message.get("sessions", [])))
                elif message.get("type") == "session":
                    sub.offer(message)  # coalesced with this worker's own updates
        finally:
            if not first.done():
                first.set_result([])

    tasks = []
    for path in peers.others():
        first = loop.create_future()
        firsts.append(first)
        tasks.append(asyncio.create_task(follow(path, first)))
    done, _ = await asyncio.wait(firsts, timeout=ASK_TIMEOUT_S) if firsts else (set(), set())
    theirs = [s for f in firsts if f in done for s in f.result()]
    return theirs, tasks


async def _relay_session(websocket: WebSocket, peers: Peers, path, session: str) -> None:
    """The feed of a session another worker holds, passed through from that worker."""
    relayed = 0

    async def forward() -> None:
        nonlocal relayed
        async for message in peers.feed(path, session):
            relayed += 1
            await websocket.send_text(json.dumps(message, default=str))

    forwarder = asyncio.create_task(forward())
    receiver = asyncio.create_task(_drain(websocket))
    try:
        done, _ = await asyncio.wait({forwarder, receiver}, return_when=asyncio.FIRST_COMPLETED)
        if forwarder in done:
            if not relayed:
                await _no_session(websocket, session, "the worker that held it does not answer")
            await websocket.close(code=1000)
    except (WebSocketDisconnect, RuntimeError):
        pass
    finally:
        forwarder.cancel()
        receiver.cancel()


async def _no_session(websocket: WebSocket, session: str, why: str) -> None:
    """Tell the viewer there is no such live session, and why."""
    message = f"no live session {session!r}: {why}"
    await websocket.send_text(json.dumps({"type": "error", "message": message}))


async def _drain(websocket: WebSocket) -> None:
    """Read (and ignore) whatever the viewer sends, to notice when it leaves."""
    try:
        while True:
            await websocket.receive_text()
    except (WebSocketDisconnect, RuntimeError):
        return
