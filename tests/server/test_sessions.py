"""The session layer every transport shares (``server/sessions.py``), on real environments.

The transports' behaviour over the wire is checked by the live tests (framing, resume,
faults); these cases are the registry's own rules, hard to reach from a socket at a
chosen moment: a close asked for while a socket is attached, a session closed while it
is being opened, the slot an HTTP reset holds, the idle clock.
"""

from __future__ import annotations

import asyncio
import functools

import pytest
from openenv.core.env_server.exceptions import EnvironmentFactoryError, SessionCapacityError

from analyst_env.server.environment import AnalystEnvironment
from analyst_env.server.sessions import SessionRefused, Sessions


def run(coro):
    return asyncio.run(coro)


@pytest.fixture
def factory(runtime):
    return functools.partial(AnalystEnvironment, runtime)


def test_capacity_counts_sessions_and_reserved_slots(factory):
    async def main():
        sessions = Sessions(factory, max_sessions=2)
        first, _ = await sessions.open()
        async with sessions.reserve():
            assert len(sessions) == 2
            with pytest.raises(SessionCapacityError) as refused:
                await sessions.open()
            assert (refused.value.active_sessions, refused.value.max_sessions) == (2, 2)
        assert len(sessions) == 1 and first in sessions
        await sessions.close_all()
        assert len(sessions) == 0

    run(main())


def test_a_close_asked_while_a_socket_is_attached_waits_for_the_socket(factory):
    async def main():
        sessions = Sessions(factory, max_sessions=4)
        session_id, env = await sessions.open()
        assert await sessions.attach(session_id) is env
        with pytest.raises(SessionRefused, match="already has an attached WebSocket"):
            await sessions.attach(session_id)
        assert await sessions.request_close(session_id) == "closing"
        assert session_id in sessions, "closed under its open socket"
        await sessions.release(session_id, owned=False)
        assert session_id not in sessions, "the waiting close did not happen"
        assert await sessions.request_close(session_id) == "unknown"

    run(main())


def test_a_socket_that_does_not_own_its_session_leaves_it_open(factory):
    async def main():
        sessions = Sessions(factory, max_sessions=4)
        session_id, _ = await sessions.open()
        await sessions.attach(session_id)
        await sessions.release(session_id, owned=False)
        assert session_id in sessions
        assert await sessions.request_close(session_id) == "closed"
        assert len(sessions) == 0

    run(main())


def test_a_session_closed_while_it_is_opened_is_not_left_behind(factory, monkeypatch):
    # an environment whose MCP session takes a moment to start: the shutdown comes meanwhile
    monkeypatch.setattr(AnalystEnvironment, "mcp_session", lambda self: _Pause(), raising=False)

    async def main():
        sessions = Sessions(factory, max_sessions=4)
        opening = asyncio.ensure_future(sessions.open())
        await asyncio.sleep(0.01)
        assert len(sessions) == 1, "the slot is held while the session is built"
        await sessions.close_all()
        with pytest.raises(RuntimeError, match="closed while it was being opened"):
            await opening
        assert len(sessions) == 0

    run(main())


class _Pause:
    async def __aenter__(self):
        await asyncio.sleep(0.2)

    async def __aexit__(self, *exc):
        return None


def test_a_failing_factory_frees_its_slot():
    def broken():
        raise OSError("no")

    async def main():
        sessions = Sessions(broken, max_sessions=1)
        with pytest.raises(EnvironmentFactoryError):
            await sessions.open()
        assert len(sessions) == 0

    run(main())


def test_the_idle_clock_closes_only_sessions_without_a_socket(factory):
    async def main():
        sessions = Sessions(factory, max_sessions=4, idle_timeout_s=1.0)
        sessions.start_reaper()
        try:
            idle, _ = await sessions.open()
            held, _ = await sessions.open(attach=True)
            await asyncio.sleep(5.6)  # the reaper wakes every max(timeout / 4, 5) seconds
            assert idle not in sessions, "an idle session without a socket was kept"
            assert held in sessions, "a session with an open socket was reaped"
        finally:
            sessions.stop_reaper()
            await sessions.close_all()

    run(main())
