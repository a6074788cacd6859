"""One running episode: the task, its sandbox, its notebook and its outcome.

The environment holds at most one ``Episode``; tools read and write it. Keeping
the mutable episode apart from the environment object makes "no episode yet",
"episode running" and "episode over" explicit instead of a tangle of ``None``
checks on the environment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from analyst_env.envs.sandbox import Sandbox, SandboxError
from analyst_env.models import NotebookCell
from analyst_env.task_format import Task


@dataclass
class Limits:
    """Per-call limits applied to every tool of an episode."""

    # Scoring: answer-size cap, limits of the scoring process, the scoring profile.
    max_answer_bytes: int = 65_536
    score_timeout_s: float = 180.0
    score_memory_mb: int = 2048
    max_scored_file_mb: int = 64
    scoring_profile: str = "strict"

    cell_timeout_s: float = 30.0
    shell_timeout_s: float = 60.0
    max_argument_bytes: int = 262_144
    """A tool call's arguments (JSON, UTF-8) over this are refused before anything runs: no
    cell needs more, and each call's arguments are kept in the notebook and the trajectory."""
    output_limit_chars: int = 20_000
    sql_max_rows: int = 50
    episode_output_limit_bytes: int = 16 * 1024 * 1024
    """Rich outputs (images, HTML) one episode may keep; later ones are replaced by a note."""


@dataclass
class Episode:
    """State of one episode. ``done`` is final: no tool runs after it."""

    episode_id: str
    task: Task
    sandbox: Sandbox | None
    limits: Limits
    seed: int | None = None
    step_count: int = 0
    cells: list[NotebookCell] = field(default_factory=list)
    done: bool = False
    reward: float | None = None
    submitted_answer: str | None = None
    end_reason: str | None = None
    reward_breakdown: dict[str, Any] | None = None
    output_bytes: int = 0

    def require_sandbox(self) -> Sandbox:
        """The episode's sandbox; raises ``SandboxError`` if it has none (not started yet)."""
        if self.sandbox is None:
            raise SandboxError(f"episode {self.episode_id} has no sandbox")
        return self.sandbox

    def add_cell(self, cell: NotebookCell) -> NotebookCell:
        """Append ``cell`` with the next id."""
        cell.cell_id = len(self.cells)
        self.cells.append(cell)
        return cell

    def finish(self, reward: float, reason: str) -> None:
        """End the episode with ``reward`` clamped to [0, 1]."""
        self.done = True
        self.reward = min(1.0, max(0.0, float(reward)))
        self.end_reason = reason
