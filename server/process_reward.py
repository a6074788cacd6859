"""Process reward: an optional per-step score next to the outcome reward (DataPRM-style).

Off by default. ``Settings.process_reward`` (``ANALYST_ENV_PROCESS_REWARD``)
names a callable as ``"module:function"``; after every tool step that counts
(one taken in a running episode, ``final_answer`` included) it is called as::

    hook(task, tool_name, arguments, output_text, is_error, step_count) -> float | None

with the task's public view (``Task.public_view()``: no gold), the tool's name
and arguments as sent, the text the agent reads, whether the step failed, and
the episode's step count after it. A number goes into that step observation's
``metadata["process_reward"]``; ``None`` means "no opinion" and adds nothing.

It never goes into ``reward``: OpenEnv's ``reward`` is the outcome channel
trainers read (``None`` until ``final_answer``, then the verifier's score), and
mixing step scores into it would change what every existing trainer optimizes.
A trainer that wants step scores reads the metadata.

A hook that raises or returns something that is not a finite number is logged
and reported as ``metadata["process_reward_error"]``; the step itself goes on.
The hook runs on the episode's worker thread, so a slow hook slows the step.
``/mcp`` ``tools/call`` results carry no observation metadata and so no
process reward.
"""

from __future__ import annotations

import functools
import importlib
import logging
import math
import numbers
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

ProcessRewardHook = Callable[[dict[str, Any], str, dict[str, Any], str, bool, int], "float | None"]

ERROR_STEP_PENALTY = -0.1


def penalize_errors(
    task: dict[str, Any],
    tool_name: str,
    arguments: dict[str, Any],
    output_text: str,
    is_error: bool,
    step_count: int,
) -> float:
    """Example hook: -0.1 for a step that failed, 0.0 otherwise.

    Enable with ``ANALYST_ENV_PROCESS_REWARD=analyst_env.server.process_reward:penalize_errors``.

    Example:
        >>> penalize_errors({}, "run_sql", {"query": "SELEC 1"}, "Error: syntax error", True, 3)
        -0.1
        >>> penalize_errors({}, "list_files", {}, "sales.csv  (120 bytes)", False, 4)
        0.0
    """
    return ERROR_STEP_PENALTY if is_error else 0.0


@functools.cache
def load_hook(spec: str) -> ProcessRewardHook:
    """Import the hook ``spec`` names.

    Args:
        spec: ``"package.module:function"``.

    Returns:
        The callable.

    Raises:
        ValueError: If ``spec`` is malformed, the module cannot be imported, or
            it has no such callable.
    """
    module_name, sep, attr = spec.strip().partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"process reward hook {spec!r} must look like 'package.module:function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(
            f"process reward hook {spec!r}: cannot import {module_name!r}: {exc}"
        ) from None
    hook = getattr(module, attr, None)
    if not callable(hook):
        raise ValueError(f"process reward hook {spec!r}: {module_name!r} has no callable {attr!r}")
    return hook


def score_step(
    spec: str,
    task: dict[str, Any],
    tool_name: str,
    arguments: dict[str, Any],
    output_text: str,
    is_error: bool,
    step_count: int,
) -> dict[str, Any]:
    """Run the hook ``spec`` names on one step; the observation metadata entries it yields.

    Returns:
        ``{"process_reward": x}``, ``{}`` when the hook returns None, or
        ``{"process_reward_error": reason}`` when it raises or returns a non-number.
    """
    try:
        value = load_hook(spec)(task, tool_name, dict(arguments), output_text, is_error, step_count)
    except Exception as exc:  # a broken hook must never break the step
        log.exception("process reward hook %s failed on %s", spec, tool_name)
        return {"process_reward_error": f"{type(exc).__name__}: {exc}"}
    if value is None:
        return {}
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        log.warning("process reward hook %s returned %r, not a finite number", spec, value)
        return {"process_reward_error": f"hook returned {value!r}, not a finite number"}
    return {"process_reward": float(value)}
