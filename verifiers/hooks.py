"""The reward rule for tasks with ``verify`` shell hooks.

After ``final_answer``, the server runs a task's ``verify`` commands in the
sandbox. The reward is the fraction that exited 0, unless a verifier wrote a
number to ``logs/verifier/reward.txt`` (the Harbor convention), which then
wins. This module is the pure rule; running the commands is the server's job.

Example:
    >>> reward_from_verify([0, 1, 0, None], None)
    0.5
    >>> reward_from_verify([0, 1], " 0.8\\n")
    0.8
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def _exit_code(result: Any) -> int | None:
    """An exit code from an int, ``None`` (timed out / not run) or a tuple starting with one."""
    if isinstance(result, Sequence) and not isinstance(result, (str, bytes)):
        result = result[0] if result else None
    return result if isinstance(result, int) and not isinstance(result, bool) else None


def parse_reward_txt(reward_txt: str | None) -> float | None:
    """The reward written in ``reward.txt``, clamped to ``[0, 1]``; ``None`` if absent or malformed.

    Example:
        >>> parse_reward_txt("1.7")
        1.0
        >>> parse_reward_txt("pass") is None
        True
    """
    if reward_txt is None:
        return None
    try:
        value = float(str(reward_txt).strip())
    except ValueError:
        return None
    if math.isnan(value):
        return None
    return min(1.0, max(0.0, value))


def reward_from_verify(results: Sequence[Any], reward_txt: str | None = None) -> float:
    """Reward for a finished episode whose task has ``verify`` commands.

    Args:
        results: One entry per verify command: its exit code (``None`` if it
            timed out or could not run), or a tuple whose first item is the
            exit code, e.g. ``(exit_code, stdout, stderr)``.
        reward_txt: Contents of ``logs/verifier/reward.txt`` if the file exists.

    Returns:
        The float in ``reward_txt`` (clamped to ``[0, 1]``) if it parses,
        otherwise passed/total (0.0 when there are no results).
    """
    override = parse_reward_txt(reward_txt)
    if override is not None:
        return override
    results = list(results)
    if not results:
        return 0.0
    passed = sum(1 for r in results if _exit_code(r) == 0)
    return passed / len(results)
