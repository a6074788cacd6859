"""Record every episode to JSONL as it happens, for notebooks, SFT data and debugging.

Each episode gets one file, ``<state_dir>/trajectories/<start time>-<episode id>.jsonl``,
one JSON object per line, written and flushed the moment it is known:

- ``{"type": "reset", ...}``: the task id, seed, the reset observation
  (instruction, files, tools) and how long the reset took;
- ``{"type": "step", ...}``: the action (tool name and arguments), the
  observation's text, error and reward, the notebook cell the step added (with
  its Jupyter outputs: stdout, HTML, PNG) and the step's duration;
- ``{"type": "end", ...}``: the reward, why the episode ended and the answer;
- ``{"type": "close", ...}``: the episode was left (closed or reset) before it ended.

A crash therefore loses at most the step in flight. The recorder only ever sees
what the observations and the public state contain, plus the task id: ground
truth (gold answers, verifier settings) never reaches it, so it cannot leak
into a trajectory. Image blocks of observations are not stored twice: the
images live in the recorded cell's outputs.

The hot path costs one ``json.dumps`` and one buffered write plus flush per step.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from analyst_env.trajectory_files import trajectories_dir

if TYPE_CHECKING:
    from analyst_env.server.episode import Episode

_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class EpisodeRecorder:
    """Appends the records of one episode to its own JSONL file. Thread-safe."""

    def __init__(self, path: Path, episode_id: str) -> None:
        self.path = path
        self.episode_id = episode_id
        self._file: IO[str] | None = open(path, "a", encoding="utf-8")  # noqa: SIM115 (held for the episode)
        self._lock = threading.Lock()
        self._ended = False
        self._steps = 0

    def _write(self, record: dict[str, Any]) -> None:
        self._write_line(json.dumps(record, ensure_ascii=False, default=str))

    def _write_line(self, line: str) -> None:
        with self._lock:
            if self._file is None:
                return
            self._file.write(line + "\n")
            self._file.flush()

    def reset(self, episode: Episode, observation: Any, started: float) -> None:
        """Record the start of ``episode``: its reset observation as the client got it.

        Args:
            episode: The episode that just started.
            observation: The reset observation (a pydantic model).
            started: ``time.perf_counter()`` when the reset began.
        """
        self._write(
            {
                "type": "reset",
                "t": time.time(),
                "episode_id": self.episode_id,
                "task_id": episode.task.id,
                "seed": episode.seed,
                "observation": observation.model_dump(),
                "duration_s": round(time.perf_counter() - started, 6),
            }
        )
        if episode.done:
            self.end(episode)

    def step(
        self,
        episode: Episode | None,
        action: dict[str, Any],
        observation: Any,
        cell_before: Any,
        started: float,
    ) -> None:
        """Record one step: the action, what came back, and the notebook cell it added (if any).

        Args:
            episode: The episode the step ran in.
            action: ``{"tool_name", "arguments"}`` or ``{"type": "list_tools"}``.
            observation: The step's observation, a pydantic model or its dict.
            cell_before: :func:`last_cell` of the episode before the step.
            started: ``time.perf_counter()`` when the step began.
        """
        duration = time.perf_counter() - started
        cell = last_cell(episode)
        self._steps += 1
        head = {
            "type": "step",
            "t": time.time(),
            "index": self._steps - 1,
            "action": action,
            "step_count": episode.step_count if episode is not None else 0,
            "duration_s": round(duration, 6),
        }
        # pydantic serialises straight to JSON text (several times faster than dump + json.dumps);
        # only observations with image blocks take the slower path that drops the image data.
        if isinstance(observation, dict) or _has_images(observation.result):
            obs_dict = observation if isinstance(observation, dict) else observation.model_dump()
            obs_json = json.dumps(_without_image_data(obs_dict), ensure_ascii=False, default=str)
        else:
            obs_json = observation.model_dump_json()
        cell_json = (
            cell.model_dump_json() if cell is not None and cell is not cell_before else "null"
        )
        self._write_line(
            f'{json.dumps(head, default=str)[:-1]}, "observation": {obs_json}, '
            f'"cell": {cell_json}}}'
        )
        if episode is not None and episode.done:
            self.end(episode)

    def end(self, episode: Episode) -> None:
        """Record the end of ``episode`` (once): reward, reason and the submitted answer."""
        if self._ended:
            return
        self._ended = True
        self._write(
            {
                "type": "end",
                "t": time.time(),
                "reward": episode.reward,
                "end_reason": episode.end_reason,
                "submitted_answer": episode.submitted_answer,
                "step_count": episode.step_count,
            }
        )

    def close(self) -> None:
        """Close the file; an episode that never ended gets a ``close`` record. Idempotent."""
        if not self._ended:
            self._write({"type": "close", "t": time.time(), "steps": self._steps})
            self._ended = True
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


_PRUNE_EVERY_S = 30.0
_last_prune: dict[Path, float] = {}
_prune_lock = threading.Lock()


class TrajectoryStore:
    """Creates one ``EpisodeRecorder`` per episode under ``<state_dir>/trajectories``.

    Args:
        state_dir: The server's state directory.
        keep: Keep at most this many trajectory files, deleting the oldest
            (checked at most every 30 s per directory, so a busy server pays a
            directory listing twice a minute, not per episode); 0 keeps all.
    """

    def __init__(self, state_dir: str | Path, keep: int = 0) -> None:
        self.root = trajectories_dir(state_dir)
        self.keep = keep

    @classmethod
    def for_settings(cls, settings: Any) -> TrajectoryStore | None:
        """The store of a server with ``settings``, or None when recording is off."""
        if not settings.record_trajectories:
            return None
        return cls(settings.state_dir, keep=settings.trajectories_kept)

    def prune(self) -> int:
        """Delete the oldest files beyond ``keep`` (file names sort by start time); return how
        many."""
        if self.keep <= 0:
            return 0
        try:
            # Names, not Paths: sorting 10,000 Paths took 250 ms of a reset's thread.
            names = sorted(n for n in os.listdir(self.root) if n.endswith(".jsonl"))
        except FileNotFoundError:
            return 0
        removed = 0
        for name in names[: max(0, len(names) - self.keep)]:
            try:
                os.unlink(os.path.join(self.root, name))
                removed += 1
            except FileNotFoundError:
                pass
        return removed

    def _maybe_prune(self) -> None:
        now = time.monotonic()
        with _prune_lock:
            if now - _last_prune.get(self.root, -_PRUNE_EVERY_S) < _PRUNE_EVERY_S:
                return
            _last_prune[self.root] = now
        self.prune()

    def start(self, episode: Episode, observation: Any, started: float) -> EpisodeRecorder:
        """A recorder for ``episode`` in a new file, with its reset already recorded.

        The episode id may be client-chosen, so the file name uses a sanitised
        copy after a UTC timestamp that keeps files in start order.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        if self.keep > 0:
            self._maybe_prune()
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        safe = _SAFE.sub("_", episode.episode_id)[:80] or "episode"
        recorder = EpisodeRecorder(self.root / f"{stamp}-{safe}.jsonl", episode.episode_id)
        recorder.reset(episode, observation, started)
        return recorder


def last_cell(episode: Episode | None) -> Any:
    """The episode's newest notebook cell (compared by identity to find the cell a step added)."""
    return episode.cells[-1] if episode is not None and episode.cells else None


def _has_images(result: Any) -> bool:
    content = result.get("content") if isinstance(result, dict) else None
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "image" for b in content
    )


def _without_image_data(observation: dict[str, Any]) -> dict[str, Any]:
    """``observation`` with the base64 data of image blocks dropped (the cell keeps the images)."""
    result = observation.get("result")
    if not isinstance(result, dict):
        return observation
    content = result.get("content")
    if not isinstance(content, list) or not any(
        b.get("type") == "image" for b in content if isinstance(b, dict)
    ):
        return observation
    blocks = [
        {"type": "image", "mimeType": b.get("mimeType"), "omitted": True}
        if b.get("type") == "image"
        else b
        for b in content
    ]
    return {**observation, "result": {**result, "content": blocks}}
