"""The reward rule for tasks with ``verify`` shell hooks.

After ``final_answer``, the server runs a task's ``verify`` commands in the
sandbox. The reward is the fraction that exited 0, unless a verifier wrote a
number to its ``reward.txt`` (the Harbor convention), which then wins. Only a
finite number in ``[0, 1]`` counts: a file that says ``1e309``, ``nan``,
``-1``, ``2`` or ``pass`` is a broken verifier, and scores 0.0 with the reason
(never clamped to a full reward). This module is the pure rule; running the
commands, in a directory the agent could not have written, is the server's job
(``server/verification.py``).

Example:
    >>> reward_from_verify([0, 1, 0, None], None)
    0.5
    >>> reward_from_verify([0, 1], " 0.8\\n")
    0.8
    >>> reward_from_verify([0, 0], "1e309")
    0.0
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

MAX_REWARD_TXT_CHARS = 64
"""A reward file longer than this is not a number a verifier wrote; it is not parsed."""


def _exit_code(result: Any) -> int | None:
    """An exit code from an int, ``None`` (timed out / not run) or a tuple starting with one."""
    if isinstance(result, Sequence) and not isinstance(result, (str, bytes)):
        result = result[0] if result else None
    return result if isinstance(result, int) and not isinstance(result, bool) else None


def read_reward_txt(reward_txt: str | None) -> tuple[float | None, str | None]:
    """The reward a verifier wrote and, if it is not a valid one, why.

    Returns:
        ``(None, None)`` if there is no file; ``(value, None)`` for a finite
        number in ``[0, 1]``; ``(0.0, reason)`` for anything else.

    Example:
        >>> read_reward_txt(" 0.25\\n")
        (0.25, None)
        >>> read_reward_txt("2")
        (0.0, "reward.txt says '2', outside [0, 1]")
        >>> read_reward_txt(None)
        (None, None)
    """
    if reward_txt is None:
        return None, None
    text = str(reward_txt).strip()
    if len(text) > MAX_REWARD_TXT_CHARS:
        return 0.0, f"reward.txt holds {len(text)} characters, not a number"
    try:
        value = float(text)
    except ValueError:
        return 0.0, f"reward.txt says {text!r}, not a number"
    if not math.isfinite(value):
        return 0.0, f"reward.txt says {text!r}, not a finite number"
    if not 0.0 <= value <= 1.0:
        return 0.0, f"reward.txt says {text!r}, outside [0, 1]"
    return value, None


def parse_reward_txt(reward_txt: str | None) -> float | None:
    """The reward ``reward.txt`` stands for: ``None`` if absent, 0.0 if invalid (see
    :func:`read_reward_txt`).

    Example:
        >>> parse_reward_txt("1.7"), parse_reward_txt("pass"), parse_reward_txt("1")
        (0.0, 0.0, 1.0)
    """
    return read_reward_txt(reward_txt)[0]


def reward_from_verify(results: Sequence[Any], reward_txt: str | None = None) -> float:
    """Reward for a finished episode whose task has ``verify`` commands.

    Args:
        results: One entry per verify command: its exit code (``None`` if it
            timed out or could not run), or a tuple whose first item is the
            exit code, e.g. ``(exit_code, stdout, stderr)``.
        reward_txt: Contents of the verifiers' ``reward.txt`` if the file exists.

    Returns:
        The number in ``reward_txt`` if there is one (0.0 unless it is a finite
        number in ``[0, 1]``), otherwise passed/total (0.0 when there are no results).
    """
    override = parse_reward_txt(reward_txt)
    if override is not None:
        return override
    results = list(results)
    if not results:
        return 0.0
    passed = sum(1 for r in results if _exit_code(r) == 0)
    return passed / len(results)
