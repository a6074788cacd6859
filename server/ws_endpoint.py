"""The ``/ws`` and ``/mcp`` WebSocket endpoints, owned here so no frame can end a session.

OpenEnv 0.10's endpoints parse each frame outside their per-message ``try`` and
catch only ``JSONDecodeError``: a binary frame, a JSON array, number, string or
null, nesting deeper than the recursion limit or an integer of more than 4300
digits ends the socket (and its episode) with ``SESSION_ERROR``. These endpoints
speak the same wire format with the same error codes (``WSErrorCode``, JSON-RPC
``JsonRpcErrorCode``), byte for byte for valid frames, but answer every
malformed frame with an error frame and go on with the next one.

They reuse the session registry of OpenEnv's ``HTTPEnvServer`` (capacity,
``/mcp`` ``openenv/session/*``, ``/ws?session_id=``), and they differ from it in
two ways besides framing:

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
import inspect
from collections.abc import MutableMapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from fastapi import FastAPI, WebSocket, WebSocketDisconnect
from openenv.core.env_server._utils import overrides_method
from openenv.core.env_server.exceptions import EnvironmentFactoryError, SessionCapacityError
from openenv.core.env_server.http_server import HTTPEnvServer
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

from analyst_env.server.peers import Peers
from analyst_env.server.resume import Attachment, Parked, Parking, ResumeError, ResumeState
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
    """The WebSocket side of OpenEnv's session registry, plus what a drain needs to know."""

    def __init__(
        self,
        server: HTTPEnvServer,
        mcp_handler,
        resume_grace_s: float = 120.0,
        peers: Peers | None = None,
    ) -> None:
        self.server = server
        self.peers = peers  # sibling workers of `serve --workers N`: they may hold an episode
        self.draining = False
        self.in_flight = 0  # frames being handled now
        self.sockets: set[WebSocket] = set()
        self.parking = Parking(resume_grace_s, lambda sid: self.release_session(sid, owned=True))
        self.mcp = McpEndpoint(self, mcp_handler)  # /mcp, and the ``mcp`` frames of /ws

    # ── session ownership ───────────────────────────────────────────────────
    async def open_session(self, websocket: WebSocket) -> tuple[str, Environment, bool]:
        """Attach to ``?session_id=`` or create a session; it is marked attached either way (never
        reaped).

        Returns (session id, environment, whether this socket owns the session).
        """
        server = self.server
        requested = websocket.query_params.get("session_id")
        if requested:
            async with server._session_lock:
                env = server._sessions.get(requested, _MISSING)
                if env is _MISSING:
                    raise RuntimeError(f"Unknown session_id: {short(requested)}")
                if env is None:
                    raise RuntimeError(f"Session {requested} is still initializing")
                if requested in server._session_websocket_attachments:
                    raise RuntimeError(f"Session {requested} already has an attached WebSocket")
                server._session_websocket_attachments.add(requested)
            server._update_session_activity(requested)
            return requested, env, False
        session_id, env = await server._create_session()
        async with server._session_lock:
            if session_id in server._sessions:
                server._session_websocket_attachments.add(session_id)
        return session_id, env, True

    async def release_session(self, session_id: str, owned: bool) -> None:
        server = self.server
        # No await before discarding: a task cancelled here must not leave the session exempt from
        # reaping.
        server._session_websocket_attachments.discard(session_id)
        server._update_session_activity(session_id)  # the idle clock starts when the socket goes
        if owned or session_id in server._session_pending_closes:
            await asyncio.shield(server._destroy_session(session_id))

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
                    await self.release_session(session_id, owned)
            await close(websocket)

    async def _sibling_holding(self, query) -> Path | None:
        """The sibling worker holding what a ``/ws`` query names: the parked episode of a
        resume secret, or an existing session (``?session_id=``) this worker does not hold."""
        if self.peers is None:
            return None
        if "resume_secret" in query:
            return self.peers.owner(query["resume_secret"])
        requested = query.get("session_id")
        if requested and requested not in self.server._sessions:
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
        server = self.server
        try:
            if msg_type == "reset":
                msg = WSResetMessage(**frame)
                if overrides_method(env.reset_async, Environment.reset_async):
                    kwargs = server._get_valid_kwargs(inspect.signature(env.reset_async), msg.data)
                    observation = await env.reset_async(**kwargs)
                else:
                    kwargs = server._get_valid_kwargs(inspect.signature(env.reset), msg.data)
                    observation = await server._run_in_session_executor(
                        session_id, env.reset, **kwargs
                    )
                server._update_session_activity(session_id)
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
                action = read_action(msg.data, server.action_cls)
                if overrides_method(env.step_async, Environment.step_async):
                    observation = await env.step_async(action)
                else:
                    observation = await server._run_in_session_executor(
                        session_id, env.step, action
                    )
                server._update_session_activity(session_id, increment_step=True)
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


_MISSING = object()


def _closure_var(fn, name: str) -> Any:
    """The value of the free variable ``name`` of ``fn`` (OpenEnv keeps ``mcp_handler`` in a
    closure)."""
    try:
        index = fn.__code__.co_freevars.index(name)
    except ValueError:
        raise RuntimeError(
            f"openenv's {fn.__name__} no longer closes over {name!r}; analyst_env's WebSocket "
            "endpoints "
            "need updating for this openenv version"
        ) from None
    return fn.__closure__[index].cell_contents


def install_ws_endpoints(
    app: FastAPI, resume_grace_s: float = 120.0, peers: Peers | None = None
) -> SessionSockets:
    """Replace OpenEnv's ``/ws`` and ``/mcp`` WebSocket routes of ``app`` with ours, on the same
    sessions."""
    ws_route = next(
        r for r in app.router.routes if isinstance(r, WebSocketRoute) and r.path == "/ws"
    )
    server = _closure_var(ws_route.endpoint, "self")
    sockets = SessionSockets(
        server, _closure_var(ws_route.endpoint, "mcp_handler"), resume_grace_s, peers
    )
    app.router.routes[:] = [
        r
        for r in app.router.routes
        if not (isinstance(r, WebSocketRoute) and r.path in ("/ws", "/mcp"))
    ]
    app.add_api_websocket_route("/ws", sockets.ws)
    app.add_api_websocket_route("/mcp", sockets.mcp.serve)
    app.state.env_server = server
    app.state.sockets = sockets
    return sockets
