"""``AnalystEnvironment``: one data-analysis episode at a time, served by OpenEnv.

The environment is an OpenEnv ``Environment`` whose actions are OpenEnv's MCP
actions (``ListToolsAction``/``CallToolAction``). Tool calls are dispatched
straight to the tool functions in ``tools.py`` (``tool_dispatch.py``): routing them
through FastMCP's in-process client would cost ~5 ms per call, ten times a notebook
cell. The same dispatch serves ``/mcp`` ``tools/call`` through ``mcp_server``, a FastMCP
server built on first use whose tools call back into this environment, so both
paths validate, count steps and score identically.

A session's calls run one at a time (``_serial``). A reset, and a step on a sandbox
whose waits yield to the event loop (a ``loop_bridge.YieldsToLoop``: the local backend's),
run on the loop's thread itself (``loop_bridge``), with no thread per session; what
would block there goes to a thread (``episode_start``, ``offload``). A step on any
other sandbox runs on the environment's own worker thread.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from analyst_env.openenv_compat import load_openenv

load_openenv()  # before the first openenv import: skips its unused Gradio UI

# E402: the imports below must run after load_openenv() above.
from openenv.core.env_server.interfaces import Environment  # noqa: E402
from openenv.core.env_server.mcp_types import (  # noqa: E402
    CallToolAction,
    ListToolsAction,
    ListToolsObservation,
    Tool,
    ToolError,
    ToolErrorType,
)
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation  # noqa: E402

from analyst_env.envs.capabilities import protections_of  # noqa: E402
from analyst_env.envs.loop_bridge import (  # noqa: E402
    YieldsToLoop,
    offload,
    offload_if,
    run_cooperatively,
)
from analyst_env.models import (  # noqa: E402
    AnalystResetObservation,
    AnalystState,
    AnalystToolObservation,
)
from analyst_env.server.curriculum import check_client_id  # noqa: E402
from analyst_env.server.episode import Episode  # noqa: E402
from analyst_env.server.episode_start import choose, start_sandbox  # noqa: E402
from analyst_env.server.metrics import (  # noqa: E402
    metered_reset,
    metered_tool_call,
)
from analyst_env.server.process_reward import score_step  # noqa: E402
from analyst_env.server.reset_options import ResetOptions  # noqa: E402
from analyst_env.server.runtime import Runtime  # noqa: E402
from analyst_env.server.task_api import TaskApi  # noqa: E402
from analyst_env.server.tool_dispatch import (  # noqa: E402
    SessionClosed,
    ToolCallError,
    invoke_tool,
    recorded_arguments,
)
from analyst_env.server.tools import TOOLS, ToolOutput  # noqa: E402
from analyst_env.server.trajectories import EpisodeRecorder, last_cell  # noqa: E402

DESCRIPTION = (
    "Data-analyst tasks over CSV, SQLite and Excel files, solved in a stateful "
    "notebook sandbox (Python with pandas/duckdb/matplotlib, SQL, shell) and "
    "scored by the task's verifier when the agent calls final_answer."
)


class AnalystEnvironment(TaskApi, Environment[Action, Observation, AnalystState]):
    """One session's environment. Cheap to construct; the sandbox starts at ``reset``."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, runtime: Runtime) -> None:
        super().__init__()
        self._runtime = runtime
        self._episode: Episode | None = None
        self._lock = threading.RLock()
        self._serial = asyncio.Lock()  # one call of the session's at a time, whichever path
        self._executor: ThreadPoolExecutor | None = None
        self._mcp_server: Any = None
        self._trajectories = runtime.trajectories
        self._recorder: EpisodeRecorder | None = None
        self._live = runtime.live  # what /web shows of this session, live
        self._live_id = self._live.new_session_id()
        self._curriculum_client: str | None = None
        self._closed = False  # set by close(): a closed session never starts a sandbox again

    # ── episode lifecycle ───────────────────────────────────────────────────
    @metered_reset
    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        **options: Any,
    ) -> AnalystResetObservation:
        """Start a new episode on the task chosen by ``task_id`` or ``split``/``index``.

        Without a task choice the task is drawn from all served tasks, by ``seed``
        when given. The same (task, seed) always gives the same initial state.

        Raises:
            ValueError: Unknown reset options or conflicting choices.
            KeyError: No such task or split.
            IndexError: ``index`` outside the split.
            SessionClosed: The session was closed (reaped, or its socket went away).
        """
        if self._closed:
            raise SessionClosed()
        started = time.perf_counter()
        opts = ResetOptions.parse(seed=seed, episode_id=episode_id, options=options)
        runtime = self._runtime
        client = check_client_id(opts.client_id or f"connection-{self._live_id}")
        if opts.curriculum_group is not None:
            check_client_id(opts.curriculum_group, "curriculum_group")
        self._count_for_curriculum(self._episode)  # before the pick, so it sees this reward
        chosen = choose(runtime, opts, client)
        task, image = chosen.task, chosen.image
        with self._lock:
            if self._closed:  # closed while this reset waited for the lock
                raise SessionClosed()
            self._end_episode()
            self._curriculum_client = client if chosen.curriculum is not None else None
            episode = Episode(
                episode_id=opts.episode_id or uuid.uuid4().hex,
                task=task,
                sandbox=None,
                limits=runtime.limits,
                seed=opts.seed,
            )
            self._episode = episode
            status, message = start_sandbox(runtime, episode, image)
            observation = AnalystResetObservation(
                episode_id=episode.episode_id,
                task_id=task.id,
                instruction=task.instruction,
                files=chosen.files,
                available_tools=[t.spec() for t in TOOLS.values()],
                max_steps=task.max_steps,
                status=status,
                message=message,
                done=episode.done,
                reward=episode.reward,
                metadata={
                    "status": status,
                    "task_id": task.id,
                    "instruction": task.instruction,
                    **image.metadata(),
                    # a broken upstream gold, served because its id was asked for; the
                    # evidence stays in the task catalogue (it may quote the gold)
                    **({"quarantined": True} if task.quarantine_reason else {}),
                    **({"curriculum": chosen.curriculum} if chosen.curriculum else {}),
                },
            )
            if self._trajectories is not None:
                self._recorder = self._trajectories.start(episode, observation, started)
            self._live.reset(self._live_id, episode, observation)
            return observation

    def step(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        """Run one action: ``ListToolsAction`` or ``CallToolAction``. Every step counts."""
        if isinstance(action, ListToolsAction):
            with self._lock:
                if self._episode is not None and not self._episode.done:
                    self._episode.step_count += 1
            tools = [Tool(**t.spec().model_dump()) for t in TOOLS.values()]
            return ListToolsObservation(tools=tools)
        if not isinstance(action, CallToolAction):
            return AnalystToolObservation(
                tool_name="",
                error=ToolError(
                    error_type=ToolErrorType.INVALID_ARGS,
                    message=f"unsupported action {type(action).__name__}; "
                    "send call_tool or list_tools",
                ),
            )
        with self._lock:
            started, cell_before = time.perf_counter(), last_cell(self._episode)
            counted = self._episode is not None and not self._episode.done
            try:
                output = self._invoke(action.tool_name, action.arguments)
                error = None
            except ToolCallError as exc:
                output, error = None, ToolError(error_type=exc.error_type, message=str(exc))
            episode = self._episode
            done = episode is not None and episode.done
            metadata: dict[str, Any] = {}
            if episode is not None and done:
                if episode.reward_breakdown is not None:
                    metadata["reward_breakdown"] = episode.reward_breakdown
                metadata["end_reason"] = episode.end_reason
            hook = self._runtime.settings.process_reward
            # A per-step score, kept out of the outcome `reward` (process_reward.py).
            if counted and hook and episode is not None:
                text = output.text if output else error.message if error else ""
                is_error = output is None or output.is_error
                metadata.update(
                    offload(
                        score_step,
                        hook,
                        episode.task.public_view(),
                        action.tool_name,
                        action.arguments,
                        text,
                        is_error,
                        episode.step_count,
                    )
                )
            observation = AnalystToolObservation(
                tool_name=action.tool_name,
                result=output.as_call_tool_result() if output else None,
                error=error,
                done=done,
                reward=episode.reward if episode is not None and done else None,
                step_count=episode.step_count if episode else 0,
                metadata=metadata,
            )
            call = {
                "tool_name": action.tool_name,
                "arguments": recorded_arguments(action.arguments, episode),
            }
            if self._recorder is not None:
                self._recorder.step(episode, call, observation, cell_before, started)
            self._live.step(self._live_id, episode, call, observation, cell_before, started)
            return observation

    async def reset_async(
        self, seed: int | None = None, episode_id: str | None = None, **options: Any
    ):
        async with self._serial:
            if self._closed:
                raise SessionClosed()
            # Every wait of a reset yields to the loop or goes to a thread (start_nowait,
            # offload), so it runs on the loop's thread too.
            return await run_cooperatively(self.reset, seed, episode_id, **options)

    async def step_async(self, action: Action, timeout_s: float | None = None, **kwargs: Any):
        async with self._serial:
            return await self._off_loop_if_needed(self.step, action)

    @property
    def state(self) -> AnalystState:
        episode = self._episode
        if episode is None:
            return AnalystState()
        return AnalystState(
            episode_id=episode.episode_id,
            step_count=episode.step_count,
            task_id=episode.task.id,
            cells=list(episode.cells),
            done=episode.done,
            reward=episode.reward,
            submitted_answer=episode.submitted_answer,
            max_steps=episode.task.max_steps,
        )

    def close(self) -> None:
        """End the episode and kill its sandbox. Safe to call from any thread, twice.

        The flag is set before the lock is taken, so a reset running now finishes, its
        episode is ended here, and no later reset starts a sandbox nobody would close.
        """
        self._closed = True
        with self._lock:
            self._end_episode()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    def get_metadata(self) -> EnvironmentMetadata:
        from analyst_env import __version__

        protections = protections_of(self._runtime.backend)
        description = DESCRIPTION
        if protections:
            active = ", ".join(f"{k}={v}" for k, v in protections.items())
            description += (
                f" Sandbox ({self._runtime.backend.name}; details at GET /sandbox): {active}."
            )
        return EnvironmentMetadata(name="analyst_env", description=description, version=__version__)

    # ── tool dispatch (shared by /ws steps and /mcp tools/call) ───────────────
    @metered_tool_call
    def _invoke(self, name: str, arguments: dict[str, Any]) -> ToolOutput:
        return invoke_tool(
            self._episode, name, arguments, closed=self._closed, metrics=self._runtime.metrics
        )

    def _end_episode(self) -> None:
        recorder, self._recorder = self._recorder, None
        if recorder is not None:
            recorder.close()
        if self._episode is not None:
            self._live.close(self._live_id)
        episode, self._episode = self._episode, None
        self._count_for_curriculum(episode)
        if episode is not None and episode.sandbox is not None:
            sandbox = episode.sandbox
            # A remote sandbox's close ends the episode over the network: off the event loop.
            offload_if(not isinstance(sandbox, YieldsToLoop), sandbox.close)

    def _count_for_curriculum(self, episode: Episode | None) -> None:
        """Give the curriculum a finished episode's reward, once (an unfinished one counts not)."""
        client, self._curriculum_client = self._curriculum_client, None
        curriculum = self._runtime.curriculum
        if curriculum is not None and client and episode is not None and episode.done:
            curriculum.record(client, episode.reward or 0.0)

    async def _off_loop_if_needed(self, fn, *args):
        """Run ``fn`` cooperatively on the loop if the episode's sandbox can yield to it, else on
        the worker thread."""
        if self._closed:
            raise SessionClosed()
        episode = self._episode
        if episode is None or episode.sandbox is None or isinstance(episode.sandbox, YieldsToLoop):
            return await run_cooperatively(fn, *args)
        return await self._in_worker(fn, *args)

    async def _in_worker(self, fn, *args, **kwargs):
        if self._closed:
            raise SessionClosed()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="analyst-episode")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: fn(*args, **kwargs))

    # ── /mcp JSON-RPC: FastMCP tools that call back into _invoke ────────────
    @property
    def mcp_server(self) -> Any:
        """A FastMCP server exposing the tools (built on first use: /mcp only)."""
        if self._mcp_server is None:
            from analyst_env.server.mcp_bridge import build_mcp_server

            self._mcp_server = build_mcp_server(self._call_tool_for_mcp)
        return self._mcp_server

    async def _call_tool_for_mcp(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        def call() -> dict[str, Any]:
            with self._lock:
                started, cell_before = time.perf_counter(), last_cell(self._episode)
                try:
                    result = self._invoke(name, arguments).as_call_tool_result()
                except ToolCallError as exc:
                    raise RuntimeError(f"{exc.error_type.value}: {exc}") from None
                if self._recorder is not None and self._episode is not None:
                    episode = self._episode
                    observation = {
                        "tool_name": name,
                        "result": result,
                        "done": episode.done,
                        "reward": episode.reward,
                    }
                    call = {"tool_name": name, "arguments": arguments, "via": "mcp"}
                    self._recorder.step(episode, call, observation, cell_before, started)
                self._live.step(
                    self._live_id,
                    self._episode,
                    {"tool_name": name, "arguments": arguments, "via": "mcp"},
                    {"tool_name": name, "result": result},
                    cell_before,
                    started,
                )
                return result

        async with self._serial:
            return await self._off_loop_if_needed(call)
