"""Reconnect a dropped ``/ws`` socket and resume its episode (the server's ``?resume=1`` protocol).

A trainer's connection can drop while the model generates (a proxy's idle cut, a
network blip, a server-side ping timeout). The server keeps the episode for a grace
period (``server/resume.py``); this module is the client half: it reconnects with
backoff to ``/ws?episode_id=..&resume_secret=..&seen=..`` until the server hands the
episode back or the grace period is over.

The first frame after a resume tells what happened to a step that was in flight:
the client sends ``state`` right after connecting, and the server writes any missed
step reply before it reads that frame. So the first frame is either the missed
observation (the step ran; it is not run again) or the state (the step never reached
the server, and the caller sends it again).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

#: Transport failures that mean "the connection is gone", as opposed to a server error frame.
DROPS = (ConnectionClosed, OSError, EOFError)
#: Error codes with which the server refuses a socket (a step's own errors have other codes).
REFUSALS = ("SESSION_ERROR", "CAPACITY_REACHED", "FACTORY_ERROR")
#: How long past the grace period a client keeps retrying while the server says the old
#: connection still runs its step (the grace period only starts once that step ends).
ATTACHED_MAX_WAIT_S = 600.0


class EpisodeLostError(ConnectionError):
    """The connection dropped and the episode could not be resumed; reset to start a new one."""


@dataclass
class ResumeTicket:
    """What a client needs to resume its episode: handed out in the reset's metadata."""

    episode_id: str
    secret: str
    grace_s: float
    steps_seen: int = 0  # step replies received since the reset

    @classmethod
    def from_reset(cls, data: dict[str, Any], default_grace_s: float) -> ResumeTicket | None:
        """The ticket in a reset reply's ``data``; None if the server offers no resumption."""
        meta = data.get("metadata") or {}
        episode_id = (data.get("observation") or {}).get("episode_id")
        secret = meta.get("resume_secret")
        if not episode_id or not secret:
            return None
        grace = meta.get("resume_grace_s")
        return cls(
            str(episode_id),
            str(secret),
            float(grace) if isinstance(grace, (int, float)) else default_grace_s,
        )

    def url(self, ws_url: str) -> str:
        query = urlencode(
            {"episode_id": self.episode_id, "resume_secret": self.secret, "seen": self.steps_seen}
        )
        return f"{ws_url}?{query}"


@dataclass
class Backoff:
    """Delays between reconnect attempts: doubling from ``initial_s`` up to ``max_s``."""

    initial_s: float = 0.05
    max_s: float = 2.0


async def resume_episode(
    ws_url: str,
    ticket: ResumeTicket,
    connect_kwargs: dict[str, Any],
    dropped_at: float,
    backoff: Backoff,
    message_timeout_s: float,
) -> tuple[ClientConnection, dict[str, Any] | None]:
    """A new socket attached to the ticket's episode, and the missed step reply if there was one.

    Retries (with ``backoff``) while the server is unreachable, until the grace period
    that began at ``dropped_at`` has passed. While the server answers that the old
    connection still runs a step (a long cell, or a loaded machine), the episode is
    alive and its grace period has not begun: each such answer moves the deadline to
    a grace period from then, for ``ATTACHED_MAX_WAIT_S`` at most.

    Raises:
        EpisodeLostError: The grace period passed, or the server says the episode is
            gone (expired, closed by a drain or a restart, or the secret is wrong).
    """
    deadline = dropped_at + ticket.grace_s + 1.0
    latest = deadline + ATTACHED_MAX_WAIT_S
    delay, last_problem = backoff.initial_s, "no attempt made"
    while True:
        try:
            ws = await ws_connect(ticket.url(ws_url), **connect_kwargs)
        except (TimeoutError, OSError, InvalidHandshake, InvalidURI) as exc:
            last_problem = f"cannot connect: {exc}"
        else:
            try:
                first = await _probe(ws, message_timeout_s)
            except (TimeoutError, *DROPS, ValueError) as exc:
                last_problem = f"the new connection failed too: {exc!r}"
            else:
                data = first.get("data") or {}
                if not (first.get("type") == "error" and data.get("code") in REFUSALS):
                    if first.get("type") == "state":
                        return ws, None
                    # the reply of the step in flight (an observation, or the step's error)
                    await asyncio.wait_for(ws.recv(), timeout=message_timeout_s)  # the state
                    return ws, first
                last_problem = str(data.get("message", "unknown error"))
                if not data.get("retry"):
                    _quiet_close(ws)
                    raise EpisodeLostError(_lost(ticket, last_problem))
                deadline = min(latest, max(deadline, time.monotonic() + ticket.grace_s + 1.0))
            _quiet_close(ws)
        if time.monotonic() + delay > deadline:
            raise EpisodeLostError(
                _lost(
                    ticket,
                    f"gave up after the grace period ({ticket.grace_s:g} s); "
                    f"last problem: {last_problem}",
                )
            )
        await asyncio.sleep(delay)
        delay = min(delay * 2, backoff.max_s)


async def _probe(ws: ClientConnection, timeout_s: float) -> dict[str, Any]:
    """Send ``state`` and read the first frame (a refused resume sends an error and closes).

    The read does not wait for the send: the server answers a refused resume with an
    error frame and closes at once, and a send into a closing connection waits for the
    TCP close (up to websockets' close timeout, 10 s, where a half-open link never
    delivers it) before it fails, while the error frame is already there to read.
    """
    sending = asyncio.ensure_future(_send_state(ws))
    try:
        first = json.loads(await asyncio.wait_for(ws.recv(), timeout=timeout_s))
    except BaseException:
        sending.cancel()
        raise
    if not isinstance(first, dict):
        sending.cancel()
        raise ValueError(f"the server's first frame is not a JSON object: {first!r:.200}")
    if first.get("type") == "error" and (first.get("data") or {}).get("code") in REFUSALS:
        sending.cancel()
    else:
        await asyncio.wait_for(sending, timeout=timeout_s)
    return first


async def _send_state(ws: ClientConnection) -> None:
    try:
        await ws.send(json.dumps({"type": "state"}))
    except ConnectionClosed:
        pass  # the error frame, if any, is still queued: recv() returns it or raises


def _quiet_close(ws: ClientConnection) -> None:
    """Drop a refused attempt's connection at once (a close handshake can take seconds)."""
    ws.transport.abort()


def _lost(ticket: ResumeTicket, why: str) -> str:
    return (
        f"the connection to the server dropped and episode {ticket.episode_id} could not be "
        f"resumed: {why}. Reset to start a new episode."
    )
