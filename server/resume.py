"""Episodes that survive a dropped connection: parked for a grace period, resumed with a secret.

A trainer's socket can drop in the middle of a long generation (a proxy's idle cut, a
network blip). A ``/ws`` socket opened with ``?resume=1`` gets a ``resume_secret`` in
the metadata of each reset observation. If that socket then goes away without a
``close`` frame, its session (kernel, files, state, step count, trajectory) is parked
instead of closed: it keeps its ``--max-sessions`` slot and is never reaped for
idleness, for ``resume_grace_s`` seconds (default 120). A client that reconnects to
``/ws?episode_id=<id>&resume_secret=<secret>`` within that time continues the same
episode; if a step finished while it was away, the first frame it receives is that
step's observation. After the grace period the session is closed, and a resume gets
an error frame (``SESSION_ERROR``) saying so.

Two more cases make a client's reconnect loop exact:

* The server may not have noticed the drop yet (a step is still running, or a
  half-open connection waits for its ping timeout). A resume with the right secret
  then takes the episode over: the old socket is let go (at once if it waits for a
  frame, after its step otherwise, that step's reply kept for the new socket), and
  the resume gets an error frame with ``"retry": true``: try again shortly.
* The reply to the last step may have been written into a connection that was
  already dead. A resume URL may carry ``&seen=<n>``, the number of step replies the
  client received since the reset; if the server sent one more than that, the first
  frame on the new socket is that last step reply again. A step is never run twice.
"""

from __future__ import annotations

import asyncio
import hmac
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from analyst_env.server.peers import session_prefix


class ResumeError(RuntimeError):
    """No parked episode matches; ``retry`` if it is alive but its old socket is still attached."""

    def __init__(self, message: str, retry: bool = False) -> None:
        super().__init__(message)
        self.retry = retry


@dataclass
class ResumeState:
    """What a resumable socket knows: the episode it serves and that episode's secret."""

    episode_id: str | None = None
    secret: str | None = None
    step_replies: int = 0  # replies to step frames since the reset
    last_step_reply: str | None = None

    def issue(self, episode_id: str) -> str:
        # the secret names this worker under `serve --workers N`: a sibling relays a resume here
        self.episode_id, self.secret = episode_id, session_prefix() + secrets.token_urlsafe(24)
        self.step_replies, self.last_step_reply = 0, None
        return self.secret

    def record_step_reply(self, reply: str) -> None:
        self.step_replies += 1
        self.last_step_reply = reply

    def missed_reply(self, seen: str | None) -> str | None:
        """The last step reply if the client says it saw one fewer than were sent (``seen``)."""
        try:
            seen_count = int(seen) if seen is not None and len(seen) < 20 else None
        except ValueError:
            return None
        if seen_count is not None and seen_count == self.step_replies - 1:
            return self.last_step_reply
        return None


@dataclass
class Attachment:
    """The open socket of a resumable episode, as a resume that takes the episode over sees it."""

    task: asyncio.Task | None
    receiving: bool = False  # waiting for the client's next frame
    taken_over: bool = False  # a resume claimed the episode: stop serving this socket

    def take_over(self) -> None:
        self.taken_over = True
        if self.receiving and self.task is not None:
            self.task.cancel()  # the handler treats this as the connection dropping


@dataclass
class Parked:
    session_id: str
    env: Any
    state: ResumeState
    pending_reply: str | None = None
    timer: asyncio.Task | None = field(default=None, repr=False)


class Parking:
    """Parked sessions by episode id, each closed by ``close_session`` when its grace ends."""

    def __init__(self, grace_s: float, close_session: Callable[[str], Awaitable[None]]) -> None:
        self.grace_s = grace_s
        self._close_session = close_session
        self._parked: dict[str, Parked] = {}
        self._attached: dict[str, tuple[str, Attachment]] = {}  # open sockets, with their secrets

    def __len__(self) -> int:
        return len(self._parked)

    def park(self, parked: Parked) -> None:
        episode_id = parked.state.episode_id
        assert episode_id is not None
        previous = self._parked.pop(episode_id, None)
        if previous is not None and previous.timer is not None:
            previous.timer.cancel()
        self._parked[episode_id] = parked
        parked.timer = asyncio.ensure_future(self._expire(episode_id, parked))

    def attach(self, state: ResumeState, attachment: Attachment) -> None:
        if state.episode_id is not None and state.secret is not None:
            self._attached[state.episode_id] = (state.secret, attachment)

    def detach(self, episode_id: str | None) -> None:
        if episode_id is not None:
            self._attached.pop(episode_id, None)

    def claim(self, episode_id: str, secret: str) -> Parked:
        """The parked session of ``episode_id`` if ``secret`` is its secret."""
        parked = self._parked.get(episode_id)
        attached = self._attached.get(episode_id)
        if parked is None and attached and _same(attached[0], secret):
            attached[1].take_over()
            raise ResumeError(
                f"episode {episode_id[:100]!r} is still attached to its previous connection (the "
                "server had not seen that connection drop; it is let go now, after the step that "
                "runs, if any); retry shortly",
                retry=True,
            )
        if parked is None or parked.state.secret is None or not _same(parked.state.secret, secret):
            raise ResumeError(
                f"no episode {episode_id[:100]!r} is waiting to be resumed: it was closed, its "
                f"grace period ({self.grace_s:g} s) has passed, it is attached to another "
                "socket, or the "
                "resume secret is wrong. "
                "Reset to start a new episode."
            )
        del self._parked[episode_id]
        if parked.timer is not None:
            parked.timer.cancel()
        return parked

    async def _expire(self, episode_id: str, parked: Parked) -> None:
        await asyncio.sleep(self.grace_s)
        if self._parked.get(episode_id) is parked:
            del self._parked[episode_id]
            await self._close_session(parked.session_id)

    def clear(self) -> None:
        """Forget every parked session (at shutdown, when the sessions themselves are closed)."""
        for parked in self._parked.values():
            if parked.timer is not None:
                parked.timer.cancel()
        self._parked.clear()


def _same(secret: str, given: str) -> bool:
    """Constant-time comparison of a resume secret with what a client sent."""
    return hmac.compare_digest(secret.encode(), given.encode())
