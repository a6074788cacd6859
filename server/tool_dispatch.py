"""One tool call on an episode, shared by ``/ws`` steps and ``/mcp`` ``tools/call``.

Both paths dispatch here, so they refuse, count steps, end episodes at the step
limit and report sandbox failures the same way. Calls that cannot run at all (no
episode, an unknown tool, invalid arguments) raise :class:`ToolCallError`, which the
protocol layers turn into OpenEnv's ``ToolError``; a tool whose code fails returns
an output marked ``is_error``, which the model reads like any other result.
"""

from __future__ import annotations

import json
from typing import Any

from openenv.core.env_server.mcp_types import ToolErrorType

from analyst_env.envs.sandbox import SandboxError, SandboxStartError
from analyst_env.server.episode import Episode, Limits
from analyst_env.server.metrics import ServerMetrics
from analyst_env.server.tools import TOOLS, ToolOutput


class ToolCallError(Exception):
    """A tool call that could not run at all (not a failure of the code it ran)."""

    def __init__(self, error_type: ToolErrorType, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type


class SessionClosed(RuntimeError):
    """A reset or tool call on a session that has been closed."""

    def __str__(self) -> str:
        return "this session is closed; open a new session (a new WebSocket) to start an episode"


def invoke_tool(
    episode: Episode | None,
    name: str,
    arguments: dict[str, Any],
    *,
    closed: bool,
    metrics: ServerMetrics,
) -> ToolOutput:
    """Run tool ``name`` with ``arguments`` in ``episode``: every call on a running episode
    counts as a step, whatever its outcome.

    Raises:
        ToolCallError: the call could not run (no episode, the episode is over, an unknown
            tool, invalid arguments).
    """
    if episode is None and closed:
        raise ToolCallError(ToolErrorType.EXECUTION_ERROR, str(SessionClosed()))
    if episode is None:
        raise ToolCallError(
            ToolErrorType.EXECUTION_ERROR,
            "No episode is running: the environment has not been reset yet.",
        )
    if episode.done:
        raise ToolCallError(
            ToolErrorType.EXECUTION_ERROR,
            f"The episode is over ({episode.end_reason}); no further tool calls are accepted.",
        )
    episode.step_count += 1
    try:
        tool = TOOLS.get(name)
        if tool is None:
            raise ToolCallError(
                ToolErrorType.TOOL_NOT_FOUND,
                f"Unknown tool: {name!r}. Available tools: {', '.join(TOOLS)}.",
            )
        size, limit = argument_bytes(arguments), episode.limits.max_argument_bytes
        if size > limit and name not in OWN_SIZE_LIMIT:
            raise ToolCallError(
                ToolErrorType.INVALID_ARGS,
                f"Invalid arguments for {name}: {size} bytes, over the limit of {limit} bytes "
                "per call; nothing ran. Send shorter code (a cell can write large data to a file).",
            )
        try:
            args = tool.validate(arguments)
        except ValueError as exc:
            raise ToolCallError(ToolErrorType.INVALID_ARGS, str(exc)) from None
        try:
            output = tool.run(episode, **args)
        except SandboxStartError as exc:
            # The reset answered before its kernel ran (kernel_orders) and it never did.
            metrics.sandbox_failures.labels("reset").inc()
            episode.finish(0.0, "setup_failed")
            output = ToolOutput(
                text=f"Error: {exc}. The episode is over (reward 0); reset to start a new one.",
                is_error=True,
            )
        except SandboxError as exc:
            metrics.sandbox_failures.labels("step").inc()
            output = ToolOutput(text=f"Error: the sandbox failed: {exc}", is_error=True)
    finally:
        _enforce_step_limit(episode)
    if episode.end_reason == "step_limit":
        output.text += (
            f"\n\nStep limit reached ({episode.task.max_steps} steps): "
            "the episode is over with reward 0."
        )
    return output


OWN_SIZE_LIMIT = frozenset({"final_answer"})
"""Tools whose arguments have a limit of their own, with its own outcome: an answer over
``max_answer_bytes`` ends the episode unscored (reward 0) rather than being refused, so a
policy gets no second try by sending a huge one first."""


def argument_bytes(arguments: Any) -> int:
    """The size of a call's arguments as JSON (UTF-8), the measure of ``max_argument_bytes``."""
    return len(json.dumps(arguments, ensure_ascii=False, default=str).encode())


def recorded_arguments(arguments: Any, episode: Episode | None) -> Any:
    """What the trajectory and the live view keep of a call's arguments: all of them, or, for a
    call refused as too large, only their size (a refused call is no reason to store it)."""
    limit = (episode.limits if episode is not None else Limits()).max_argument_bytes
    size = argument_bytes(arguments)
    return arguments if size <= limit else {"refused_over_limit_bytes": size}


def _enforce_step_limit(episode: Episode) -> None:
    if not episode.done and episode.step_count >= episode.task.max_steps:
        episode.finish(0.0, "step_limit")
