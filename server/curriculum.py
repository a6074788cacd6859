"""A curriculum: keep each client's success rate near a target by choosing composition depth.

``serve --dataset procedural:SEED --curriculum TARGET`` serves a reset that names no
task from the procedural set at the depth (1..6; level easy/medium/hard follows from
it) this client is at. Each finished episode's reward moves the client: a window of
``WINDOW`` rewards whose mean is above ``TARGET + BAND`` raises the depth one step,
below ``TARGET - BAND`` lowers it (a staircase), and the window starts again.

A client is the ``client_id`` reset option, else the connection. Its state is one
JSON file under ``<state_dir>/curriculum/``, read and written under an exclusive
``flock``, so every worker and every replica sharing the state dir moves the same
client. The task served is an ordinary ``procedural-SPLIT-INDEX`` (reproducible by
id); the observation's metadata says the depth asked for, the depth served and why.
Resets of one client that give the same ``curriculum_group`` within ``GROUP_TTL_S`` of
the group's first reset get the same task (the rollouts of a GRPO group must compare
attempts at one problem); later, the group is new again (a dataset row that names a group
comes back each epoch and must then get a task of the depth the client is at by then).
Only rewards and the drawn template's depth go in: nothing about a gold answer.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

WINDOW = 8
BAND = 0.15
MIN_DEPTH, MAX_DEPTH = 1, 5
"""Depths a curriculum asks for (the cheap peek never aims past 5)."""
SCAN_LIMIT = 400
"""Indices peeked per reset looking for the wanted depth (cheap: no data is made)."""
CLIENT_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
GROUP_TTL_S = 600.0
"""How long a group keeps its task (a group's rollouts reset within moments of each other)."""
GROUPS_KEPT = 1024
"""Groups remembered per client at most, the oldest forgotten first."""


def check_target(target: float) -> float:
    """``target`` if it is strictly between 0 and 1, else ``ValueError`` (one line)."""
    if not 0.0 < float(target) < 1.0:
        raise ValueError(f"--curriculum TARGET must be strictly between 0 and 1, got {target}")
    return float(target)


def check_client_id(client_id: str, option: str = "client_id") -> str:
    """``client_id`` if it is a valid id (also for ``curriculum_group``), else ``ValueError``."""
    if not CLIENT_ID.match(client_id):
        raise ValueError(
            f"reset option {option!r} must be 1-64 characters of letters, digits, '.', '_', "
            f"':' or '-', got {client_id[:80]!r}"
        )
    return client_id


@dataclass
class ClientState:
    """One client's place in the curriculum (what its file holds)."""

    depth: int = MIN_DEPTH
    window: list[float] = field(default_factory=list)
    cursor: int = -1
    """The next index to look at (-1: not yet placed; a client starts at its own offset)."""
    episodes: int = 0
    successes: int = 0
    last_change: str = "start"
    groups: dict[str, list[float]] = field(default_factory=dict)
    """``split/group`` -> [the index its first reset got, when], oldest first."""


class Curriculum:
    """Per-client depth, moved by rewards, kept under ``state_dir`` (shared by workers)."""

    def __init__(self, target: float, state_dir: str | Path, dataset: Any) -> None:
        self.target = check_target(target)
        self.dataset = dataset
        self.root = Path(state_dir) / "curriculum"
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, client: str) -> Path:
        return self.root / (hashlib.sha256(client.encode()).hexdigest()[:24] + ".json")

    def _update(self, client: str, change) -> ClientState:
        path = self._path(client)
        with open(path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                raw = json.loads(path.read_text()) if path.is_file() else {}
                state = ClientState(**{k: v for k, v in raw.items() if k != "client"})
                change(state)
                tmp = path.with_suffix(".tmp")
                tmp.write_text(json.dumps({"client": client, **asdict(state)}))
                tmp.replace(path)
                return state
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def record(self, client: str, reward: float) -> ClientState:
        """Count one finished episode's reward and move the client's depth if its window is full."""

        def change(s: ClientState) -> None:
            s.episodes += 1
            s.successes += int(reward >= 1.0)
            s.window.append(float(reward))
            if len(s.window) < WINDOW:
                return
            rate = sum(s.window) / len(s.window)
            if rate > self.target + BAND and s.depth < MAX_DEPTH:
                s.depth, s.last_change = s.depth + 1, f"up: mean reward {rate:.2f} > target"
            elif rate < self.target - BAND and s.depth > MIN_DEPTH:
                s.depth, s.last_change = s.depth - 1, f"down: mean reward {rate:.2f} < target"
            else:
                s.last_change = f"held: mean reward {rate:.2f} near target"
            s.window = []

        return self._update(client, change)

    def pick(
        self,
        client: str,
        split: str,
        group: str | None = None,
        refused: frozenset[int] = frozenset(),
    ) -> tuple[int, dict[str, Any]]:
        """The next index of ``split`` for ``client`` and the metadata saying why it was chosen.

        A ``group`` seen in the last ``GROUP_TTL_S`` gets its first reset's index again,
        unless that index is in ``refused`` (this server cannot serve it): then the group is
        given a new one.
        """
        from analyst_env.datasets.procedural.attempt_draw import peek_depth
        from analyst_env.datasets.procedural.splits import SPLIT_SIZE

        found: dict[str, Any] = {}
        key = None if group is None else f"{split}/{group}"

        now = time.time()

        def change(s: ClientState) -> None:
            pinned = s.groups.get(key) if key is not None else None
            if pinned is not None and now - pinned[1] < GROUP_TTL_S and pinned[0] not in refused:
                index = int(pinned[0])
                found.update(index=index, drawn_depth=peek_depth(self.dataset.seed, split, index))
                return
            if s.cursor < 0:
                s.cursor = int(hashlib.sha256(client.encode()).hexdigest()[:8], 16) % SPLIT_SIZE
            best = None
            for step in range(SCAN_LIMIT):
                index = (s.cursor + step) % SPLIT_SIZE
                depth = peek_depth(self.dataset.seed, split, index)
                if best is None or abs(depth - s.depth) < abs(best[1] - s.depth):
                    best = (index, depth)
                if depth == s.depth:
                    break
            assert best is not None
            s.cursor = (best[0] + 1) % SPLIT_SIZE
            found.update(index=best[0], drawn_depth=best[1])
            if key is not None:
                s.groups.pop(key, None)
                s.groups[key] = [best[0], now]
                for stale in list(s.groups)[: max(0, len(s.groups) - GROUPS_KEPT)]:
                    del s.groups[stale]

        state = self._update(client, change)
        why = {
            "client_id": client,
            "target_success": self.target,
            "depth_wanted": state.depth,
            "depth_drawn": found["drawn_depth"],
            "reason": state.last_change,
        }
        if group is not None:
            why["curriculum_group"] = group
        return found["index"], why

    def snapshot(self) -> list[dict[str, Any]]:
        """Every client's state (for /metrics and /web)."""
        out = []
        for path in sorted(self.root.glob("*.json")):
            try:
                raw = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            out.append(raw)
        return out


def for_settings(settings: Any, unbounded: list[Any]) -> Curriculum | None:
    """The server's curriculum (None when ``settings.curriculum`` is unset).

    Raises:
        ValueError: A target is set but no procedural dataset is served.
    """
    if settings.curriculum is None:
        return None
    procedural = [ds for ds in unbounded if getattr(ds, "name", "") == "procedural"]
    if not procedural:
        raise ValueError("--curriculum needs a procedural dataset (--dataset procedural:SEED)")
    return Curriculum(settings.curriculum, settings.state_dir, procedural[0])
