"""The server's sessions: one registry for ``/ws``, ``/mcp`` (socket and HTTP) and HTTP ``/reset``.

A session is one ``AnalystEnvironment`` under an id. This registry owns what every
transport needs of it, so none of them reaches into OpenEnv's ``HTTPEnvServer``
(whose session state is private and may change in any release):

* **capacity**: at most ``max_sessions`` ids are held, counting sessions whose
  environment is still being built and the slot an HTTP ``/reset`` holds while it
  runs (:meth:`Sessions.reserve`); one more is refused with OpenEnv's public
  ``SessionCapacityError``, whose fields the error frames carry;
* **attachment**: a session with an open socket is *attached* and never reaped for
  idleness (the socket's pings are its liveness); at most one socket attaches to a
  session; a close asked for over HTTP ``/mcp`` while a socket is attached waits
  until that socket goes (:meth:`Sessions.request_close`);
* **the idle clock**: a session that is neither attached nor used for
  ``idle_timeout_s`` is closed by a reaper that wakes every ``max(timeout / 4, 5)``
  seconds, the schedule OpenEnv's own reaper keeps;
* **closing**: an environment is closed off the event loop (its sandbox may close
  over the network), once, whoever closes it first; as many closes run at once as there
  may be sessions, so a burst of remote sandboxes closing waits on none of them.

Every change to the registry is made with no ``await`` between its reads and writes, so
the event loop's single thread orders them and no lock is needed (nor can a cancelled
task leave a change half made).

Parking an episode for a resume (``resume.py``) keeps its session attached, so the
registry needs nothing more for it; the drain (``drain.py``) refuses new sessions
through ``SessionSockets.draining`` and ends the rest with :meth:`Sessions.close_all`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, Literal

from openenv.core.env_server.exceptions import EnvironmentFactoryError, SessionCapacityError
from openenv.core.env_server.interfaces import Environment

from analyst_env.server.ws_frames import short

log = logging.getLogger(__name__)

CloseOutcome = Literal["closed", "closing", "unknown", "initializing"]
"""What :meth:`Sessions.request_close` did: closed it now, will close it when its socket goes,
no such session, or its environment is still being built."""


class SessionRefused(RuntimeError):
    """A socket cannot attach to the session it names (unknown, still starting, taken)."""


class Sessions:
    """Sessions by id: capacity, attachment, the idle clock and closing (module docstring).

    Args:
        factory: Builds one session's environment; called on the event loop, so it must be
            cheap (``AnalystEnvironment`` starts nothing until its first reset).
        max_sessions: The most ids held at once (``--max-sessions``).
        idle_timeout_s: How long a session with no socket may go unused; None: forever.
    """

    def __init__(
        self,
        factory: Callable[[], Environment],
        max_sessions: int,
        idle_timeout_s: float | None = None,
    ) -> None:
        self.factory = factory
        self.max_sessions = max_sessions
        self.idle_timeout_s = idle_timeout_s
        self._envs: dict[str, Environment | None] = {}  # None: a slot whose env is not ready
        self._stacks: dict[str, AsyncExitStack] = {}  # an env's MCP session, held while it lives
        self._last_used: dict[str, float] = {}  # time.monotonic() of the last use
        self._attached: set[str] = set()
        self._close_when_detached: set[str] = set()
        self._reaper: asyncio.Task | None = None
        # threads start on first use and are kept for the next close
        self._closer = ThreadPoolExecutor(max(1, max_sessions), thread_name_prefix="session-close")

    # ── reading ─────────────────────────────────────────────────────────────
    def __len__(self) -> int:
        """Ids held now: live sessions, sessions being built, HTTP resets running."""
        return len(self._envs)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._envs

    def lookup(self, session_id: str) -> Environment | None:
        """The environment of ``session_id``; None while it is being built.

        Raises:
            KeyError: No such session.
        """
        return self._envs[session_id]

    # ── opening and closing ─────────────────────────────────────────────────
    async def open(self, *, attach: bool = False) -> tuple[str, Environment]:
        """A new session and its environment, attached to the caller's socket if ``attach``.

        Raises:
            SessionCapacityError: Every ``max_sessions`` slot is taken.
            EnvironmentFactoryError: The factory raised.
        """
        self._check_capacity()
        session_id = str(uuid.uuid4())
        self._envs[session_id] = None  # the slot is held while the env is built
        try:
            env = self.factory()
        except Exception as exc:
            self._envs.pop(session_id, None)
            name = getattr(self.factory, "__name__", str(self.factory))
            raise EnvironmentFactoryError(name) from exc
        stack = AsyncExitStack()
        try:
            mcp_session = getattr(env, "mcp_session", None)
            if callable(mcp_session):
                await stack.enter_async_context(mcp_session())
        except BaseException:
            self._envs.pop(session_id, None)
            await self._close_env(env, stack)
            raise
        closed = session_id not in self._envs  # closed while it was built (a shutdown)
        if not closed:
            self._envs[session_id] = env
            self._stacks[session_id] = stack
            self._last_used[session_id] = time.monotonic()
            if attach:
                self._attached.add(session_id)
        if closed:
            await self._close_env(env, stack)
            raise RuntimeError("the session was closed while it was being opened")
        return session_id, env

    async def attach(self, session_id: str) -> Environment:
        """The environment of an existing session, now attached to the caller's socket.

        Raises:
            SessionRefused: No such session, it is still being built, or a socket has it.
        """
        env = self._envs.get(session_id, _MISSING)
        if env is _MISSING:
            raise SessionRefused(f"Unknown session_id: {short(session_id)}")
        if env is None:
            raise SessionRefused(f"Session {session_id} is still initializing")
        if session_id in self._attached:
            raise SessionRefused(f"Session {session_id} already has an attached WebSocket")
        self._attached.add(session_id)
        self.touch(session_id)
        return env  # neither _MISSING nor None here

    async def release(self, session_id: str, owned: bool) -> None:
        """The caller's socket is gone: close the session if it ``owned`` it (or a close waits),
        else start its idle clock."""
        # No await before the discard: a task cancelled here must not leave the session exempt
        # from reaping.
        self._attached.discard(session_id)
        self.touch(session_id)
        if owned or session_id in self._close_when_detached:
            await asyncio.shield(self.close(session_id))

    async def close(self, session_id: str) -> None:
        """End ``session_id`` and free its slot (nothing if it is gone already)."""
        env = self._envs.pop(session_id, None)
        stack = self._stacks.pop(session_id, None)
        self._forget(session_id)
        await self._close_env(env, stack)

    async def request_close(self, session_id: str) -> CloseOutcome:
        """Close ``session_id`` for a client that asked (HTTP ``/mcp``'s
        ``openenv/session/close``): at once, or when the socket attached to it goes."""
        if session_id in self._attached:
            self._close_when_detached.add(session_id)
            return "closing"
        env = self._envs.get(session_id, _MISSING)
        if env is _MISSING:
            return "unknown"
        if env is None:
            return "initializing"
        del self._envs[session_id]
        stack = self._stacks.pop(session_id, None)
        self._forget(session_id)
        await self._close_env(env, stack)
        return "closed"

    async def close_all(self) -> None:
        """End every session (at shutdown: episodes end, trajectories are flushed)."""
        for session_id in list(self._envs):
            await self.close(session_id)

    @asynccontextmanager
    async def reserve(self) -> AsyncIterator[None]:
        """Hold one slot, with no session in it, for the length of a stateless request (HTTP
        ``/reset`` builds its own environment, which must count against ``max_sessions``).

        Raises:
            SessionCapacityError: Every slot is taken.
        """
        slot = f"http-reset:{uuid.uuid4().hex}"
        self._check_capacity()
        self._envs[slot] = None
        try:
            yield
        finally:
            self._envs.pop(slot, None)

    # ── the idle clock ──────────────────────────────────────────────────────
    def touch(self, session_id: str) -> None:
        """``session_id`` was used now: its idle clock starts again."""
        if session_id in self._last_used:
            self._last_used[session_id] = time.monotonic()

    def start_reaper(self) -> None:
        """Start closing idle sessions (an app startup hook; nothing without a timeout)."""
        if self.idle_timeout_s is not None and self._reaper is None:
            self._reaper = asyncio.ensure_future(self._reap(self.idle_timeout_s))

    def stop_reaper(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None

    async def _reap(self, timeout: float) -> None:
        interval = max(timeout / 4, 5.0)
        while True:
            await asyncio.sleep(interval)
            try:
                for session_id in [sid for sid in self._last_used if self._idle(sid, timeout)]:
                    if self._idle(session_id, timeout):  # not used or attached meanwhile
                        await self.close(session_id)
            except Exception as exc:  # a failing close must not stop the clock for the rest
                log.warning("idle-session reaper: %s (will retry)", exc)

    def _idle(self, session_id: str, timeout: float) -> bool:
        used = self._last_used.get(session_id)
        return (
            used is not None
            and session_id not in self._attached
            and time.monotonic() - used > timeout
        )

    # ── internals ───────────────────────────────────────────────────────────
    def _check_capacity(self) -> None:
        if len(self._envs) >= self.max_sessions:
            raise SessionCapacityError(
                active_sessions=len(self._envs), max_sessions=self.max_sessions
            )

    def _forget(self, session_id: str) -> None:
        self._last_used.pop(session_id, None)
        self._attached.discard(session_id)
        self._close_when_detached.discard(session_id)

    async def _close_env(self, env: Environment | None, stack: AsyncExitStack | None) -> None:
        if stack is not None:
            with contextlib.suppress(Exception):
                await stack.aclose()
        if env is not None:
            try:  # off the loop: ending an episode may close a remote sandbox
                await asyncio.get_running_loop().run_in_executor(self._closer, env.close)
            except Exception as exc:
                log.warning("closing a session's environment failed: %s", exc)


_MISSING: Any = object()
