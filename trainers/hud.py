"""Evaluate and train on an analyst_env server through HUD (the ``hud`` SDK, 0.6).

HUD defines an environment as a ``hud.Environment``: task templates (async
generators that yield a prompt, receive the agent's answer, and yield a score)
plus capabilities the agent connects to, here an MCP server. HUD's agents
(``OpenAIChatAgent``, ``ClaudeAgent``, ...) open every MCP capability and offer
its tools to the model; HUD's runs grade with the template's score and HUD's
hosted training reads the runs' rewards.

:func:`make_environment` builds that environment for one server. Its
``@env.initialize`` hook reads the server's tool catalog and serves the tools
on a loopback MCP server (FastMCP, as HUD's own environments do), each call
played in the running episode. The template ``analyst_task`` resets a fresh
session into the task, yields the task text, and, once the agent is done,
yields the server's reward: the episode's own if the agent called
``final_answer``, else the reward of submitting the agent's last message as the
answer. One environment object plays one episode at a time; HUD's
``LocalRuntime`` serializes the rollouts of a shared one, so give it a
constructor (``LocalRuntime(lambda task: make_environment(url))``) to run
rollouts side by side::

    from hud.eval import LocalRuntime, Taskset
    from analyst_env.trainers.hud import make_environment, taskset

    runtime = LocalRuntime(lambda task: make_environment(URL))
    job = await taskset(URL, split="test").run(agent, runtime=runtime, max_concurrent=8)
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable
from typing import Any

from fastmcp import FastMCP
from fastmcp.tools import Tool
from fastmcp.tools.tool import ToolResult
from hud import Environment
from hud.capabilities import Capability

from analyst_env.client.analyst_client import AnalystEnv
from analyst_env.client.endpoints import split_urls
from analyst_env.models import CallToolAction
from analyst_env.prompts import SYSTEM_PROMPT, task_prompt
from analyst_env.trainers.art import curriculum_scenarios, scenarios
from analyst_env.trainers.scenario import AnalystScenario
from analyst_env.trainers.tool_catalog import fetch_tool_specs

__all__ = ["TEMPLATE", "make_environment", "taskset"]

TEMPLATE = "analyst_task"
NO_EPISODE = "no episode is running in this environment: start one with the analyst_task template"


class _Episode:
    """The one episode an environment object plays: its session, and how it ended."""

    def __init__(self, base_url: str, headers: dict[str, str] | None, timeout_s: float) -> None:
        self.base_url, self.headers, self.timeout_s = base_url, headers, timeout_s
        self.busy = False  # claimed before the session opens, so a second start is refused
        self.session: AnalystEnv | None = None
        self.result: Any = None  # the step that ended the episode
        self.tool_calls = 0  # the agent's, not the template's own submission

    async def play(self, name: str, arguments: dict[str, Any]) -> str:
        """Play one of the agent's tool calls in the running episode; the text the model reads."""
        self.tool_calls += 1
        return await self.submit(name, arguments)

    async def submit(self, name: str, arguments: dict[str, Any]) -> str:
        """Play a tool call in the running episode, keeping the step that ends it."""
        if self.session is None:
            raise RuntimeError(NO_EPISODE)
        result = await self.session.step(CallToolAction(tool_name=name, arguments=arguments))
        if result.done and self.result is None:
            self.result = result
        return str(result.observation.text)


class _EpisodeTool(Tool):
    """One of the server's tools, served over MCP and played in the running episode."""

    play: Callable[[str, dict[str, Any]], Awaitable[str]]

    async def run(self, arguments: dict[str, Any]) -> ToolResult:
        return ToolResult(content=await self.play(self.name, arguments))


def make_environment(
    base_url: str,
    *,
    token: str | None = None,
    name: str = "analyst-env",
    message_timeout_s: float = 300.0,
) -> Environment:
    """A ``hud.Environment`` playing episodes on ``base_url``.

    Args:
        base_url: The server, or several replicas (comma-separated): each episode goes to
            the least-loaded one, and a dropped connection resumes the episode.
        token: Bearer token, if the server requires one.
        name: The environment's name (the ``env`` of its tasks).
        message_timeout_s: How long a single reset or tool call may take on the server.
    """
    urls = ",".join(split_urls(base_url))
    headers = {"Authorization": f"Bearer {token}"} if token else None
    episode = _Episode(urls, headers, message_timeout_s)
    env = Environment(name)
    serving: list[asyncio.Task[None]] = []

    @env.initialize
    async def serve_tools() -> None:
        """Serve the server's tools on a loopback MCP server; publish it as a capability."""
        specs = await asyncio.to_thread(fetch_tool_specs, urls, headers)
        server = FastMCP(name=name)
        for spec in specs:
            server.add_tool(
                _EpisodeTool(
                    name=spec["name"],
                    description=spec.get("description", ""),
                    parameters=spec.get("input_schema") or {"type": "object", "properties": {}},
                    play=episode.play,
                )
            )
        # The listener is bound here and handed over, so no other process can take the port
        # between choosing and serving it. uvicorn logs nothing below CRITICAL: a failed start
        # surfaces from the task (``_wait_until_listening``), and what it would log at shutdown
        # is the cancelled lifespan of every rollout's server, once per rollout.
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        serving.append(
            asyncio.create_task(
                server.run_http_async(
                    transport="http",
                    host="127.0.0.1",
                    port=port,
                    show_banner=False,
                    sockets=[sock],
                    uvicorn_config={"log_level": "critical"},
                )
            )
        )
        await _wait_until_listening(serving[-1], port)
        env.add_capability(Capability.mcp(name="analyst", url=f"http://127.0.0.1:{port}/mcp"))

    @env.shutdown
    async def stop_serving() -> None:
        for task in serving:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        serving.clear()

    @env.template(
        id=TEMPLATE,
        description="A data-analysis question about files in a sandbox; the server grades it.",
    )
    async def analyst_task(
        task_id: str | None = None,
        split: str | None = None,
        index: int | None = None,
        seed: int | None = None,
        client_id: str | None = None,
        curriculum_group: str | None = None,
    ) -> Any:
        """Reset into the task, yield its text, then yield the server's reward for the answer."""
        where = AnalystScenario(
            task_id=task_id,
            split=split,
            index=index,
            seed=seed,
            client_id=client_id,
            curriculum_group=curriculum_group,
        )
        options = where.reset_options()  # refuses a row that names no task, before connecting
        if episode.busy:
            raise RuntimeError(
                "this environment object is already playing an episode: give LocalRuntime a "
                "constructor (lambda task: make_environment(url)) to run rollouts side by side"
            )
        episode.busy, episode.result, episode.tool_calls = True, None, 0
        try:
            async with AnalystEnv(
                base_url=urls, headers=headers, message_timeout_s=message_timeout_s
            ) as session:
                episode.session = session
                first = (await session.reset(**options)).observation
                if first.done:
                    raise RuntimeError(first.message or "the episode failed to start")
                answer = yield f"{task_prompt(first.instruction, first.files)}\n\n{SYSTEM_PROMPT}"
                if episode.result is None:  # no final_answer call: the last message answers
                    await episode.submit("final_answer", {"answer": _answer_text(answer)})
                ended = episode.result
                if ended is None:
                    raise RuntimeError("the server did not end the episode on final_answer")
                yield {
                    "score": float(ended.reward or 0.0),
                    "info": {
                        "task_id": first.task_id,
                        "episode_id": first.episode_id,
                        "tool_calls": episode.tool_calls,
                        "end_reason": (ended.observation.metadata or {}).get("end_reason")
                        or "final_answer",
                    },
                }
        finally:
            episode.session, episode.busy = None, False

    return env


def taskset(
    base_url: str,
    split: str = "train",
    *,
    env: Environment | None = None,
    client_id: str | None = None,
    **options: Any,
) -> Any:
    """A ``hud.eval.Taskset`` of one ``analyst_task`` row per task of a split of the server.

    Options as :func:`analyst_env.trainers.art.scenarios` (``dataset``, ``seed``,
    ``num_tasks`` for a split made on demand, ``start``, ``token``). With ``client_id``, for
    a ``--curriculum`` server: ``num_tasks`` rows that name the client and a group each (a
    row's ``group`` of runs plays the one task the server picks for it).
    """
    from hud.eval import Taskset

    env = env or make_environment(base_url, token=options.get("token"))
    template = env.templates[TEMPLATE]
    if client_id is not None:
        if not options.get("num_tasks"):
            raise ValueError("curriculum rows need num_tasks (how many rows to make)")
        chosen = curriculum_scenarios(client_id, options["num_tasks"], options.get("seed"))
        name = f"{env.name}-curriculum"
    else:
        chosen, name = scenarios(base_url, split, **options), f"{env.name}-{split}"
    return Taskset(name, [template(**s.reset_options()) for s in chosen])


def _answer_text(answer: Any) -> str:
    """The agent's answer as text (HUD sends the last message's content, or ``None``)."""
    if answer is None:
        return ""
    return answer if isinstance(answer, str) else str(getattr(answer, "raw", answer))


async def _wait_until_listening(task: asyncio.Task[None], port: int) -> None:
    """Wait for the MCP server's loopback listener, surfacing a failed start."""
    while True:
        if task.done():
            await task
            raise RuntimeError("the analyst_env MCP server stopped during startup")
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.01)
            continue
        writer.close()
        await writer.wait_closed()
        return
