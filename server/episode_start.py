"""Starting an episode: its task, its image, and a sandbox ready for the first tool call.

A reset runs on the event loop's thread (``loop_bridge``), so each part that may block
says so: a procedural draw generates its task (tens of ms of CPU), a backend that cannot
start a sandbox without waiting (it has no ``StartsWithoutWaiting``, or its
``start_nowait`` gives None: a zygote to boot) starts it on a thread, and a sandbox whose
calls block their thread (not a ``loop_bridge.YieldsToLoop``) runs the tools' helpers and
the task's setup hooks there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from analyst_env.envs.capabilities import StartsWithoutWaiting
from analyst_env.envs.kernel_helpers import HELPER_SOURCE
from analyst_env.envs.loop_bridge import YieldsToLoop, offload, offload_if
from analyst_env.envs.sandbox import SandboxError
from analyst_env.models import FileInfo
from analyst_env.server.envs_binding import EpisodeImage, resolve_image
from analyst_env.server.episode import Episode
from analyst_env.server.reset_options import ResetOptions
from analyst_env.server.runtime import UNBOUNDED_DRAW_SPLIT, Runtime, TaskUnavailableError
from analyst_env.task_format import Task
from analyst_env.verifiers.recalc import recalculation_refusal

UNSCORABLE_SKIPS = 16
"""Curriculum picks this server cannot score (workbooks without LibreOffice) stepped over."""
READY_MESSAGE = "Environment ready. Use add_and_execute_code_cell to start."
"""The reset message of a healthy episode (shared by every task, so no gold may be a word of it)."""


@dataclass(frozen=True)
class Choice:
    """What a reset asked for: the task, the image it runs on, its files as the agent sees
    them."""

    task: Task
    image: EpisodeImage
    files: list[FileInfo]
    curriculum: dict[str, Any] | None = None
    """Why the curriculum chose this task (depth wanted and drawn), when one is on."""


def choose(runtime: Runtime, opts: ResetOptions, client: str = "") -> Choice:
    """The reset's task, image and file previews.

    With a curriculum on, a reset naming no task (no ``task_id``, no ``index``) gets the
    procedural task the curriculum picks for ``client``.

    Raises:
        ValueError, KeyError, IndexError: As ``Runtime.select`` and ``resolve_image``.
    """

    def pick() -> Choice:
        why = None
        curriculum = runtime.curriculum
        if curriculum is not None and opts.task_id is None and opts.index is None:
            split = opts.split or UNBOUNDED_DRAW_SPLIT
            group = opts.curriculum_group
            refused: set[int] = set()
            for _ in range(UNSCORABLE_SKIPS):  # a workbook task without LibreOffice: next one
                index, why = curriculum.pick(client, split, group, frozenset(refused))
                task = curriculum.dataset.task(split, index)
                if not recalculation_refusal(task):
                    break
                refused.add(index)
            else:
                raise TaskUnavailableError(recalculation_refusal(task))
            why["depth_served"] = task.metadata.get("depth")
            why["level_served"] = task.metadata.get("level")
        else:
            task = runtime.select(
                task_id=opts.task_id, split=opts.split, index=opts.index, seed=opts.seed
            )
        image = resolve_image(runtime, task, opts.environment)  # refuses an unbuilt image
        return Choice(task, image, runtime.describe_files(task), why)

    return offload_if(bool(runtime.unbounded), pick)


def start_sandbox(runtime: Runtime, episode: Episode, image: EpisodeImage) -> tuple[str, str]:
    """Give ``episode`` its sandbox, with the helpers defined and the setup hooks run.

    Returns:
        ``(status, message)`` for the reset's observation: ``ready``, or ``error`` with
        what failed (the episode is then over with reward 0).
    """
    task, backend = episode.task, runtime.backend
    try:
        sandbox = None
        if isinstance(backend, StartsWithoutWaiting):
            sandbox = backend.start_nowait(image.image, files=task.files, seed=episode.seed)
        if sandbox is None:
            sandbox = offload(backend.start, image.image, files=task.files, seed=episode.seed)
        episode.sandbox = sandbox
        blocks = not isinstance(sandbox, YieldsToLoop)
        if not sandbox.helpers_defined:
            offload_if(
                blocks,
                sandbox.run_cell,
                HELPER_SOURCE,
                timeout_s=runtime.limits.cell_timeout_s,
                silent=True,
            )
        failed = offload_if(blocks, _run_setup, episode)
    except SandboxError as exc:
        runtime.metrics.sandbox_failures.labels("reset").inc()
        episode.finish(0.0, "setup_failed")
        return "error", f"Sandbox failed to start: {exc}"
    if failed:
        episode.finish(0.0, "setup_failed")
        return "error", f"Setup command failed: {failed}"
    return "ready", READY_MESSAGE


def _run_setup(episode: Episode) -> str | None:
    """Run the task's setup hooks; the first failing command, or None."""
    for command in episode.task.setup:
        sandbox = episode.require_sandbox()
        result = sandbox.run_shell(command, timeout_s=episode.limits.shell_timeout_s)
        if result.exit_code != 0:
            return f"{command!r} (exit {result.exit_code}): {result.stderr[-500:]}"
    return None
