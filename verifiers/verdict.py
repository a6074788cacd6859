"""What a scorer may return and what it may look at.

Most scorers compare the answer text with the gold answer and return a float.
Some need more: an execution-match scorer runs SQL against the task's own
database, a workbook scorer reads the file the agent saved in its sandbox. They
declare a ``context`` parameter and receive a ``VerifyContext``. A scorer that
can explain its reward returns a ``Verdict`` with named components, which the
server puts in the final observation's metadata as the reward breakdown.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Verdict:
    """A reward with its parts.

    Attributes:
        reward: The total, in [0, 1].
        components: Named parts of the reward (e.g. ``{"part_mean_fare": 1.0}``).
        detail: One line a person debugging the episode can read.
    """

    reward: float
    components: dict[str, float] = field(default_factory=dict)
    detail: str = ""


@dataclass(frozen=True)
class VerifyContext:
    """Where a scorer may look besides the answer text.

    Attributes:
        task_files: ``{name: host path}`` of the task's original, unmodified files.
        read_file: Reads a file from the episode's working directory (raises
            ``FileNotFoundError``); absent when scoring offline.
    """

    task_files: dict[str, str] = field(default_factory=dict)
    read_file: Callable[[str], bytes] | None = None
