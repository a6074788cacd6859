"""An in-process hub of what every session is doing right now, for the /web live view.

``AnalystEnvironment`` publishes here at the same three points where it calls
the trajectory recorder: reset, every step, and when the episode is left. Each
session keeps its events (a bounded history), so a viewer who opens a session
late still sees every cell from the start and then new ones as they happen.

Publishing runs on an episode's worker thread and must cost next to nothing:
it stores references to objects the episode already holds and hands events to
subscribers with ``loop.call_soon_threadsafe``. JSON conversion happens on the
subscriber's side. A subscriber that falls too far behind is dropped (it gets
``None``), never allowed to block an episode.

Only public data enters the hub: what the observations and the notebook hold
(no answers, no verifier settings), exactly like the trajectory recorder.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

MAX_EVENTS_PER_SESSION = 500
KEEP_FINISHED = 20
QUEUE_SIZE = 1000


@dataclass
class LiveSession:
    """One environment instance's episode as the live view shows it."""

    session_id: str
    episode_id: str
    task_id: str
    instruction: str
    started_at: float
    origin: str
    step_count: int = 0
    done: bool = False
    reward: float | None = None
    end_reason: str | None = None
    closed: bool = False
    seq: int = 0
    updated_at: float = field(default_factory=time.time)
    events: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "episode_id": self.episode_id,
            "task_id": self.task_id,
            "instruction": self.instruction[:200],
            "origin": self.origin,
            "started_at": self.started_at,
            "updated_at": self.updated_at,
            "step_count": self.step_count,
            "done": self.done,
            "reward": self.reward,
            "end_reason": self.end_reason,
            "closed": self.closed,
        }


class Subscriber:
    """One viewer. ``offer`` and ``resolve`` both run on the viewer's event loop.

    A viewer of the session list only needs each session's newest summary, so
    its updates are coalesced: the queue holds at most one entry per session,
    however fast the sessions step.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, session_id: str | None) -> None:
        self.loop = loop
        self.session_id = session_id  # None: the session list only
        self.queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(QUEUE_SIZE)
        self.dropped = False
        self._latest: dict[str, dict[str, Any]] = {}

    def offer(self, item: dict[str, Any] | None) -> None:
        """Enqueue ``item``, or drop a subscriber that fell behind (it then reads ``None``)."""
        if self.dropped:
            return
        if self.session_id is None and item is not None:
            sid = item["session"]["session_id"]
            queued = sid in self._latest
            self._latest[sid] = item
            if queued:
                return
            item = {"type": "pending", "session_id": sid}
        try:
            self.queue.put_nowait(item)
        except asyncio.QueueFull:
            self.dropped = True
            while not self.queue.empty():
                self.queue.get_nowait()
            self.queue.put_nowait(None)

    def resolve(self, item: dict[str, Any] | None) -> dict[str, Any] | None:
        """What to send for a queue entry: for the list, the session's newest summary."""
        if item is not None and item.get("type") == "pending":
            return self._latest.pop(item["session_id"])
        return item


class LiveHub:
    """Sessions running now (and the last few finished ones), with their events."""

    def __init__(self, prefix: str = "") -> None:
        self._prefix = prefix  # session ids name their worker under `serve --workers N`
        self._lock = threading.Lock()
        self._sessions: OrderedDict[str, LiveSession] = OrderedDict()
        self._subscribers: set[Subscriber] = set()
        self._ids = itertools.count(1)

    # ── publishing (episode worker threads) ─────────────────────────────────
    def new_session_id(self) -> str:
        return f"{self._prefix}s{next(self._ids)}"

    def reset(self, session_id: str, episode: Any, observation: Any) -> None:
        """A new episode started in ``session_id`` (replacing any earlier one there)."""
        origin = "web" if episode.episode_id.startswith("web-") else "client"
        session = LiveSession(
            session_id=session_id,
            episode_id=episode.episode_id,
            task_id=episode.task.id,
            instruction=episode.task.instruction,
            started_at=time.time(),
            origin=origin,
            done=episode.done,
            reward=episode.reward,
            end_reason=episode.end_reason,
        )
        event = {"type": "reset", "t": session.started_at, "observation": observation}
        with self._lock:
            old = self._sessions.pop(session_id, None)
            if old is not None:
                old.closed = True
                session.seq = (
                    old.seq
                )  # numbers keep rising on one session: viewers drop only repeats
            self._sessions[session_id] = session
            self._append(session, event)
            self._trim()
        self._notify(session, event)

    def step(
        self,
        session_id: str,
        episode: Any,
        action: dict[str, Any],
        observation: Any,
        cell_before: Any,
        started: float,
    ) -> None:
        """One step of the episode in ``session_id``: the call, what came back, the cell it added.

        ``cell_before`` is the episode's last cell before the step (compared by
        identity, as the trajectory recorder does).
        """
        now = time.time()
        cell = episode.cells[-1] if episode is not None and episode.cells else None
        event = {
            "type": "step",
            "t": now,
            "action": action,
            "observation": observation,
            "cell": cell if cell is not cell_before else None,
            "duration_s": round(time.perf_counter() - started, 6),
            "step_count": episode.step_count if episode is not None else 0,
            "done": bool(episode is not None and episode.done),
            "reward": episode.reward if episode is not None else None,
        }
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                return
            session.step_count = event["step_count"]
            session.done, session.reward = event["done"], event["reward"]
            session.end_reason = episode.end_reason if episode is not None else None
            session.updated_at = now
            self._append(session, event)
        self._notify(session, event)

    def close(self, session_id: str) -> None:
        """The episode of ``session_id`` was left (socket closed, or a new reset)."""
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None or session.closed:
                return
            session.closed = True
            session.updated_at = time.time()
            event = {"type": "closed", "t": session.updated_at}
            self._append(session, event)
            self._trim()
        self._notify(session, event)

    @staticmethod
    def _append(session: LiveSession, event: dict[str, Any]) -> None:
        """Number the event (viewers drop numbers they already have) and keep it, up to the cap."""
        session.seq += 1
        event["seq"] = session.seq
        if len(session.events) < MAX_EVENTS_PER_SESSION:
            session.events.append(event)

    def _trim(self) -> None:
        finished = [sid for sid, s in self._sessions.items() if s.closed]
        for sid in finished[: max(0, len(finished) - KEEP_FINISHED)]:
            del self._sessions[sid]

    def _notify(self, session: LiveSession, event: dict[str, Any]) -> None:
        if not self._subscribers:  # nobody watching: the common case while training
            return
        summary = session.summary()
        listing = {"type": "session", "session": summary}
        with self._lock:
            subscribers = list(self._subscribers)
        for sub in subscribers:
            if sub.session_id is None:
                item = listing
            elif sub.session_id == session.session_id:
                item = {"type": "event", "session": summary, "event": event}
            else:
                continue
            try:
                sub.loop.call_soon_threadsafe(sub.offer, item)
            except RuntimeError:  # the subscriber's loop is gone
                self.unsubscribe(sub)

    # ── reading (the web routes) ────────────────────────────────────────────
    def sessions(self) -> list[dict[str, Any]]:
        """Summaries of the sessions, newest first."""
        with self._lock:
            return [s.summary() for s in reversed(self._sessions.values())]

    def subscribe(self, session_id: str | None = None) -> tuple[Subscriber, dict[str, Any] | None]:
        """Register a subscriber on the running loop, with a snapshot taken atomically.

        Returns:
            The subscriber (read ``subscriber.queue``; ``None`` there means it
            was dropped) and, for a session, ``{"session", "events"}`` so far
            (``None`` if there is no such session). For the list, the snapshot
            is ``{"sessions": [...]}``.
        """
        sub = Subscriber(asyncio.get_running_loop(), session_id)
        with self._lock:
            self._subscribers.add(sub)
            snapshot: dict[str, Any] | None
            if session_id is None:
                snapshot = {"sessions": [s.summary() for s in reversed(self._sessions.values())]}
            else:
                session = self._sessions.get(session_id)
                snapshot = (
                    None
                    if session is None
                    else {"session": session.summary(), "events": list(session.events)}
                )
        return sub, snapshot

    def unsubscribe(self, sub: Subscriber) -> None:
        with self._lock:
            self._subscribers.discard(sub)
