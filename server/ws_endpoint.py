"""The ``/ws`` and ``/mcp`` WebSocket endpoints, owned here so no frame can end a session.

OpenEnv 0.10's endpoints parse each frame outside their per-message ``try`` and
catch only ``JSONDecodeError``: a binary frame, a JSON array, number, string or
null, nesting deeper than the recursion limit or an integer of more than 4300
digits ends the socket (and its episode) with ``SESSION_ERROR``. These endpoints
speak the same wire format with the same error codes (``WSErrorCode``, JSON-RPC
``JsonRpcErrorCode``), byte for byte for valid frames, but answer every
malformed frame with an error frame and go on with the next one.

They serve the sessions of ``sessions.py`` (capacity, ``/mcp``
``openenv/session/*``, ``/ws?session_id=``), which every transport shares, and they
differ from OpenEnv's in three ways besides framing:

* A session whose socket is open is never reaped for idleness: the socket's
  pings are its liveness. OpenEnv exempts only attached sessions, so a trainer
  that generated for longer than the idle timeout lost its episode, and its next
  reset ran on a closed environment outside ``--max-sessions``.
* While the server drains (``drain.py``) new sockets are refused with close code
  1001 and a reason, and steps in flight are counted so the drain can wait.
* A socket opened with ``?resume=1`` whose connection drops parks its episode for a
  grace period instead of closing it (``resume.py``).

This module holds ``SessionSockets`` (the state both endpoints share, and the ``/ws``
session loop) and ``install_ws_endpoints``; the ``/mcp`` endpoint is ``ws_mcp.py`` and
frame parsing and error replies are ``ws_frames.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from fastapi import FastAPI, WebSocket, WebSocketDisconnect
from openenv.core.env_server.exceptions import EnvironmentFactoryError, SessionCapacityError
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.mcp_types import (
    JsonRpcErrorCode,
    JsonRpcRequest,
    JsonRpcResponse,
    WSMCPMessage,
    WSMCPResponse,
)
from openenv.core.env_server.serialization import serialize_observation
from openenv.core.env_server.types import (
    Action,
    WSCloseMessage,
    WSErrorCode,
    WSErrorResponse,
    WSObservationResponse,
    WSResetMessage,
    WSStateMessage,
    WSStateResponse,
    WSStepMessage,
)
from pydantic import ValidationError
from starlette.routing import WebSocketRoute

from analyst_env.server.mcp_rpc import McpRpc
from analyst_env.server.peers import Peers
from analyst_env.server.resume import Attachment, Parked, Parking, ResumeError, ResumeState
from analyst_env.server.route_wrapping import remove_routes
from analyst_env.server.sessions import Sessions
from analyst_env.server.step_action import ActionError, read_action
from analyst_env.server.ws_frames import (
    DRAINING_CLOSE_CODE,
    DRAINING_REASON,
    FrameError,
    close,
    error_frame,
    parse_frame,
    send,
    short,
    validation_errors,
)
from analyst_env.server.ws_mcp import McpEndpoint
from analyst_env.server.ws_relay import relay_socket


class SessionSockets:
    """The WebSocket side of the server's sessions, plus what a drain needs to know.

    Args:
        sessions: The sessions every transport shares.
        rpc: Answers ``/mcp`` requests and the ``mcp`` frames of ``/ws``.
        action_cls: What a ``step`` frame's action is read as.
        resume_grace_s: How long a dropped ``?resume=1`` socket's episode stays parked.
        peers: The sibling workers of ``serve --workers N``, if any.
    """

    def __init__(
        self,
        sessions: Sessions,
        rpc: McpRpc,
        action_cls: type[Action],
        resume_grace_s: float = 120.0,
        peers: Peers | None = None,
    ) -> None:
        self.sessions = sessions
        self.action_cls = action_cls
        self.peers = peers  # sibling workers of `serve --workers N`: they may hold an episode
        self.draining = False
        self.in_flight = 0  # frames being handled now
        self.sockets: set[WebSocket] = set()
        self.parking = Parking(resume_grace_s, lambda sid: sessions.release(sid, owned=True))
        self.mcp = McpEndpoint(self, rpc)  # /mcp, and the ``mcp`` frames of /ws

    # ── session ownership ───────────────────────────────────────────────────
    async def open_session(self, websocket: WebSocket) -> tuple[str, Environment, bool]:
        """Attach to ``?session_id=`` or create a session; it is marked attached either way (never
        reaped).

        Returns (session id, environment, whether this socket owns the session).
        """
        requested = websocket.query_params.get("session_id")
        if requested:
            return requested, await self.sessions.attach(requested), False
        session_id, env = await self.sessions.open(attach=True)
        return session_id, env, True

    # ── /ws ─────────────────────────────────────────────────────────────────
    async def ws(self, websocket: WebSocket) -> None:
        """OpenEnv's ``/ws`` protocol (reset, step, state, close, mcp); every bad frame gets an
        error frame."""
        await websocket.accept()
        if self.draining:
            # ``draining`` says it in data: a client moves to another replica without reading prose.
            refusal = error_frame(DRAINING_REASON, WSErrorCode.SESSION_ERROR, draining=True)
            await send(websocket, refusal)
            await close(websocket, DRAINING_CLOSE_CODE, DRAINING_REASON)
            return
        session_id, owned = None, False
        query = websocket.query_params
        resume = ResumeState() if query.get("resume") == "1" and self.parking.grace_s > 0 else None
        pending, closed_cleanly = None, False
        attachment = Attachment(asyncio.current_task())
        self.sockets.add(websocket)
        try:
            try:
                owner = await self._sibling_holding(query)
                if owner is not None:  # held by a sibling worker: pass the socket through
                    assert self.peers is not None
                    await relay_socket(websocket, self.peers, owner)
                    return
                if "resume_secret" in query:
                    parked = self.parking.claim(query.get("episode_id", ""), query["resume_secret"])
                    session_id, env, owned, resume, pending = (
                        parked.session_id,
                        parked.env,
                        True,
                        parked.state,
                        parked.pending_reply,
                    )
                    self.parking.attach(resume, attachment)
                    if pending is None:  # a reply written into the dead connection, if any
                        pending = resume.missed_reply(query.get("seen"))
                else:
                    session_id, env, owned = await self.open_session(websocket)
            except ResumeError as exc:
                extra = {"retry": True} if exc.retry else {}
                await send(websocket, error_frame(str(exc), WSErrorCode.SESSION_ERROR, **extra))
                return
            except SessionCapacityError as exc:
                await send(
                    websocket,
                    error_frame(
                        str(exc),
                        WSErrorCode.CAPACITY_REACHED,
                        active_sessions=exc.active_sessions,
                        max_sessions=exc.max_sessions,
                    ),
                )
                return
            except EnvironmentFactoryError as exc:
                await send(
                    websocket,
                    error_frame(str(exc), WSErrorCode.FACTORY_ERROR, factory_name=exc.factory_name),
                )
                return
            except Exception as exc:
                await send(websocket, error_frame(str(exc), WSErrorCode.SESSION_ERROR))
                return
            async with AsyncExitStack() as stack:
                mcp_session = getattr(env, "mcp_session", None)
                if owned and callable(mcp_session):
                    await stack.enter_async_context(mcp_session())
                if (
                    pending is not None
                ):  # the reply to a step that finished while the client was away
                    if await send(websocket, pending):
                        pending = None
                while pending is None:
                    message = await self._receive(websocket, attachment)
                    if message["type"] == "websocket.disconnect":
                        break
                    self.in_flight += 1
                    try:
                        reply = await self._ws_frame(message, env, session_id, resume, attachment)
                    finally:
                        self.in_flight -= 1
                    if reply is None:  # a close frame
                        closed_cleanly = True
                        break
                    if attachment.taken_over or not await send(websocket, reply):
                        pending = reply
                        break
        except WebSocketDisconnect:
            pass
        finally:
            self.sockets.discard(websocket)
            if resume is not None:
                self.parking.detach(resume.episode_id)
            if session_id is not None:
                if (
                    owned
                    and resume is not None
                    and resume.episode_id is not None
                    and not closed_cleanly
                    and not self.draining
                ):
                    self.parking.park(
                        Parked(session_id, env, resume, pending)
                    )  # stays attached: never reaped
                else:
                    await self.sessions.release(session_id, owned)
            await close(websocket)

    async def _sibling_holding(self, query) -> Path | None:
        """The sibling worker holding what a ``/ws`` query names: the parked episode of a
        resume secret, or an existing session (``?session_id=``) this worker does not hold."""
        if self.peers is None:
            return None
        if "resume_secret" in query:
            return self.peers.owner(query["resume_secret"])
        requested = query.get("session_id")
        if requested and requested not in self.sessions:
            return await self.peers.holder_of(requested)
        return None

    @staticmethod
    async def _receive(websocket: WebSocket, attachment: Attachment) -> MutableMapping[str, Any]:
        """The next ASGI message; a disconnect if a resume took the episode over meanwhile."""
        if attachment.taken_over:
            return {"type": "websocket.disconnect", "code": 1001}
        attachment.receiving = True
        try:
            return await websocket.receive()
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if not attachment.taken_over or task is None:
                raise
            task.uncancel()
            return {"type": "websocket.disconnect", "code": 1001}
        finally:
            attachment.receiving = False

    async def _ws_frame(
        self,
        message: MutableMapping[str, Any],
        env: Environment,
        session_id: str,
        resume: ResumeState | None = None,
        attachment: Attachment | None = None,
    ) -> str | None:
        """The reply to one frame (None for ``close``). Never raises for anything the client
        sent."""
        try:
            frame = parse_frame(message)
        except FrameError as exc:
            return error_frame(str(exc), exc.code)
        if not isinstance(frame, dict):
            return WSErrorResponse(
                data={
                    "message": "Invalid message",
                    "code": WSErrorCode.VALIDATION_ERROR,
                    "errors": [
                        {
                            "type": "model_type",
                            "loc": [],
                            "msg": f"a frame must be a JSON object, got {type(frame).__name__}",
                        }
                    ],
                }
            ).model_dump_json()
        reply = await self._ws_reply(frame, env, session_id, resume, attachment)
        if resume is not None and reply is not None and frame.get("type") == "step":
            resume.record_step_reply(reply)  # kept for a client whose connection ate it
        return reply

    async def _ws_reply(
        self,
        frame: dict,
        env: Environment,
        session_id: str,
        resume: ResumeState | None,
        attachment: Attachment | None,
    ) -> str | None:
        msg_type = frame.get("type", "")
        try:
            if msg_type == "reset":
                msg = WSResetMessage(**frame)
                # AnalystEnvironment.reset_async takes every option as a keyword (**options)
                observation = await env.reset_async(**msg.data)
                self.sessions.touch(session_id)
                data = serialize_observation(observation)
                episode_id = getattr(observation, "episode_id", None)
                if resume is not None and episode_id:
                    self.parking.detach(resume.episode_id)
                    resume_meta = {
                        "resume_secret": resume.issue(episode_id),
                        "resume_grace_s": self.parking.grace_s,
                    }
                    if attachment is not None:
                        self.parking.attach(resume, attachment)
                    data["metadata"] = {**(data.get("metadata") or {}), **resume_meta}
                    data["observation"]["metadata"] = {
                        **(data["observation"].get("metadata") or {}),
                        **resume_meta,
                    }
                return WSObservationResponse(data=data).model_dump_json()
            if msg_type == "step":
                msg = WSStepMessage(**frame)
                action = read_action(msg.data, self.action_cls)
                observation = await env.step_async(action)
                self.sessions.touch(session_id)
                return WSObservationResponse(
                    data=serialize_observation(observation)
                ).model_dump_json()
            if msg_type == "state":
                WSStateMessage(**frame)
                state = env.state
                data = state.model_dump() if hasattr(state, "model_dump") else dict(state or {})
                return WSStateResponse(data=data).model_dump_json()
            if msg_type == "close":
                WSCloseMessage(**frame)
                return None
            if msg_type == "mcp":
                msg = WSMCPMessage(**frame)
                try:
                    request = JsonRpcRequest(**msg.data)
                except Exception as exc:
                    response = JsonRpcResponse.error_response(
                        JsonRpcErrorCode.INVALID_REQUEST, f"Invalid request: {exc}"
                    )
                else:
                    response = await self.mcp.rpc(request, env, session_id)
                return WSMCPResponse(data=response.model_dump()).model_dump_json()
            return error_frame(f"Unknown message type: {short(msg_type)}", WSErrorCode.UNKNOWN_TYPE)
        except ValidationError as exc:
            return WSErrorResponse(
                data={
                    "message": "Invalid message",
                    "code": WSErrorCode.VALIDATION_ERROR,
                    "errors": validation_errors(exc),
                }
            ).model_dump_json()
        except ActionError as exc:
            return error_frame(str(exc), WSErrorCode.VALIDATION_ERROR)
        except Exception as exc:
            return error_frame(str(exc), WSErrorCode.EXECUTION_ERROR)


def install_ws_endpoints(app: FastAPI, sockets: SessionSockets) -> None:
    """Serve ``/ws`` and the ``/mcp`` WebSocket of ``app`` (in place of OpenEnv's) from
    ``sockets``."""
    remove_routes(app, "/ws", "/mcp", kind=WebSocketRoute)  # HTTP POST /mcp stays
    app.add_api_websocket_route("/ws", sockets.ws)
    app.add_api_websocket_route("/mcp", sockets.mcp.serve)
