"""Recorded episodes (``server/trajectories.py`` JSONL files) for the /web replay view.

Listing must stay fast with thousands of files, so a summary reads only the
first line (the reset record) and the tail of the file (the end record);
whole files are read only when one episode is opened. File names come from
the listing and are checked against a strict pattern and the directory, so a
request can never read anything outside the trajectories directory.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Literal, get_args

from analyst_env.trajectory_files import read_trajectory, trajectories_dir

NAME = re.compile(r"^[A-Za-z0-9_.-]{1,200}\.jsonl$")
TAIL_BYTES = 64 * 1024


class TrajectoryNotFound(LookupError):
    """No recorded episode has this name."""


OutcomeFilter = Literal["", "solved", "partial", "failed", "running", "left"]
OriginFilter = Literal["", "eval", "web", "trainer"]
OUTCOMES: tuple[str, ...] = get_args(OutcomeFilter)[1:]
ORIGINS: tuple[str, ...] = get_args(OriginFilter)[1:]


def origin_of(episode_id: str | None) -> str:
    """Who played an episode, from its id: ``eval`` runs and /web name theirs, the rest are
    a trainer's or another client's."""
    episode_id = episode_id or ""
    if episode_id.startswith("eval-"):
        return "eval"
    return "web" if episode_id.startswith("web-") else "trainer"


def outcome_of(summary: dict[str, Any]) -> str:
    """``solved`` (reward 1), ``partial``, ``failed`` (reward 0), ``running`` or ``left``
    (the client went away before an answer): what a badge shows."""
    if summary["status"] != "ended":
        return str(summary["status"])
    reward = summary.get("reward") or 0.0
    return "solved" if reward >= 1.0 else "partial" if reward > 0 else "failed"


def _keep(summary: dict[str, Any], query: str, outcome: str, origin: str, run: str) -> bool:
    if query and not any(
        query in str(summary.get(k) or "").lower() for k in ("name", "task_id", "episode_id")
    ):
        return False
    if outcome and summary["outcome"] != outcome:
        return False
    if origin and summary["origin"] != origin:
        return False
    return not run or str(summary.get("episode_id") or "").startswith(f"eval-{run}-")


def list_trajectories(
    state_dir: str | Path,
    *,
    limit: int = 100,
    offset: int = 0,
    query: str = "",
    outcome: str = "",
    origin: str = "",
    run: str = "",
) -> dict[str, Any]:
    """Summaries of recorded episodes, newest first.

    Args:
        state_dir: The server's ``settings.state_dir``.
        limit: At most this many summaries (1..500).
        offset: Skip this many of the newest that match (for paging).
        query: Keep only files whose name, task id or episode id contains this.
        outcome: Keep only one of :data:`OUTCOMES` (empty: all).
        origin: Keep only episodes played by one of :data:`ORIGINS` (empty: all).
        run: Keep only the episodes of this eval run (its run id).
    """
    root = trajectories_dir(state_dir)
    limit = max(1, min(int(limit), 500))
    try:
        names = sorted((n for n in os.listdir(root) if NAME.match(n)), reverse=True)
    except FileNotFoundError:
        names = []
    query = query.strip().lower()
    out: list[dict[str, Any]] = []
    if not (query or outcome or origin or run):
        # Without a filter only the requested page is read: a server keeps up to
        # ``trajectories_kept`` files (10,000 by default) and the list is polled.
        for name in names[offset:]:
            summary = _summary(root / name)
            if summary is not None:
                out.append(summary)
            if len(out) == limit:
                break
        return {"trajectories": out, "total": len(names), "offset": offset, "limit": limit}
    matched = 0
    for name in names:
        summary = _summary(root / name)
        if summary is None:
            continue
        if not _keep(summary, query, outcome, origin, run.strip()):
            continue
        matched += 1
        if matched > offset and len(out) < limit:
            out.append(summary)
    return {"trajectories": out, "total": matched, "offset": offset, "limit": limit}


def load_trajectory(state_dir: str | Path, name: str) -> dict[str, Any]:
    """Every record of the recorded episode ``name`` (a file name from the listing).

    Raises:
        TrajectoryNotFound: The name is malformed or no such file exists.
    """
    root = trajectories_dir(state_dir)
    if not NAME.match(name) or not (root / name).is_file():
        raise TrajectoryNotFound(f"no recorded episode named {name!r}")
    return {"name": name, "records": read_trajectory(root / name)}


def _summary(path: Path) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as fh:
            first = fh.readline()
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - TAIL_BYTES))
            tail = fh.read().splitlines()
    except OSError:
        return None
    try:
        reset = json.loads(first)
    except ValueError:
        return None
    summary: dict[str, Any] = {
        "name": path.name,
        "episode_id": reset.get("episode_id"),
        "task_id": reset.get("task_id"),
        "started_at": reset.get("t"),
        "size_bytes": size,
        "status": "running",
        "reward": None,
        "end_reason": None,
        "steps": 0,
        "ended_at": None,
    }
    for line in reversed(tail):
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a torn line, or the cut start of a line in the tail window
        kind = record.get("type")
        if kind == "end":
            summary.update(
                status="ended",
                reward=record.get("reward"),
                end_reason=record.get("end_reason"),
                steps=record.get("step_count", 0),
                ended_at=record.get("t"),
            )
            break
        if kind == "close":
            summary.update(status="left", steps=record.get("steps", 0), ended_at=record.get("t"))
            break
        if kind == "step":
            summary.update(steps=record.get("step_count", 0), ended_at=record.get("t"))
            break
    summary["origin"] = origin_of(summary["episode_id"])
    summary["outcome"] = outcome_of(summary)
    return summary
