"""``AnalystEnv``: the typed OpenEnv client for analyst_env.

A plain OpenEnv ``EnvClient`` over ``/ws``: async by default, synchronous
outside an event loop or through ``.sync()``, with one method per tool.

Example (against ``analyst-env serve``)::

    from analyst_env.client import AnalystEnv

    with AnalystEnv(base_url="http://127.0.0.1:8000").sync() as env:
        first = env.reset(task_id="starter-sales-000")
        print(first.observation.instruction)
        step = env.add_and_execute_code_cell("import pandas as pd; pd.read_csv('sales.csv').shape")
        print(step.observation.text)
        result = env.final_answer("42")
        print(result.reward, result.done)

A dropped connection does not end the episode: the client opens ``/ws?resume=1``,
and when the socket drops it reconnects with backoff and resumes the same episode
(``resume.py``). A step that was in flight gets its observation (it is not run
again); a step that never reached the server is sent again. If the episode cannot be
resumed within the server's grace period, the call raises ``EpisodeLostError``.
``resume=False`` gives OpenEnv's plain behaviour.

``base_url`` may name several replicas (a list, or comma-separated): each new
connection goes to the least-loaded one and fails over on a connection error or a
full or draining server (``endpoints.py``); an episode stays on its replica.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import time
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.mcp_types import ListToolsAction, ListToolsObservation
from openenv.core.env_server.types import Action, Observation
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State as SocketState

from analyst_env.client.endpoints import EndpointPool, split_urls
from analyst_env.client.resume import DROPS, Backoff, ResumeTicket, resume_episode
from analyst_env.models import (
    AnalystResetObservation,
    AnalystState,
    AnalystToolObservation,
    CallToolAction,
)

if TYPE_CHECKING:
    from websockets.asyncio.client import ClientConnection


def is_loopback_url(url: str) -> bool:
    """Whether ``url``'s host is this machine (``localhost`` or a loopback address).

    The host is parsed, never matched as a substring: ``127.0.0.1.example.com`` and
    ``my-localhost.example.com`` are remote. A local server is reached without a proxy.

    Example:
        >>> [is_loopback_url(u) for u in ("ws://localhost:8000/ws", "ws://[::1]/ws",
        ...  "ws://127.0.0.1.example.com/ws", "wss://example.com/ws")]
        [True, True, False, False]
    """
    host = urlsplit(url).hostname
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class AnalystEnv(EnvClient[Action, Observation, AnalystState]):
    """Client for one episode session. ``reset``, ``step``, ``state`` plus a method per tool.

    Tool methods return a ``StepResult`` whose ``observation`` is an
    ``AnalystToolObservation``; ``observation.text`` is what the model would read.

    Args:
        base_url: The server, or several replicas (a list, or comma-separated URLs): a new
            connection goes to the least-loaded and fails over to the next.
        resume: Reconnect and resume the episode when the connection drops (default).
        resume_grace_s: How long to keep trying if the server does not say (it does).
        backoff: Delays between reconnect attempts.
        Everything else as OpenEnv's ``EnvClient``.
    """

    # The base's attributes, declared here because this class reassigns them.
    _ws_url: str | None
    _ws: ClientConnection | None
    _ws_loop: asyncio.AbstractEventLoop | None

    def __init__(
        self,
        *args: Any,
        resume: bool = True,
        resume_grace_s: float = 120.0,
        backoff: Backoff | None = None,
        **kwargs: Any,
    ) -> None:
        self._resume = resume  # set first: the base __init__ calls _set_base_url
        self._default_grace_s = resume_grace_s
        self._backoff = backoff or Backoff()
        self._ticket: ResumeTicket | None = None
        self.resumes = 0  # how many times a dropped connection was resumed
        base_url = args[0] if args else kwargs.get("base_url")
        self._endpoints: EndpointPool | None = None
        if base_url is not None:
            urls = split_urls(base_url)
            if len(urls) > 1:
                self._endpoints = EndpointPool.shared(urls, kwargs.get("headers"))
            if args:
                args = (urls[0], *args[1:])
            else:
                kwargs["base_url"] = urls[0]
        super().__init__(*args, **kwargs)

    # ── several replicas ────────────────────────────────────────────────────
    async def _connect_async(self) -> AnalystEnv:
        pool = self._endpoints
        if pool is None or self._ticket is not None or not self._socket_is_gone():
            await super()._connect_async()  # one server, or the episode's own replica
            return self
        problems = []
        for url in await asyncio.to_thread(pool.order):
            self._set_base_url(url)
            try:
                await super()._connect_async()
            except ConnectionError as exc:
                pool.failed(url)
                problems.append(str(exc))
                continue
            pool.sent(url)
            return self
        raise ConnectionError(f"no server accepted the connection: {'; '.join(problems)}")

    async def _reset_elsewhere(self, message: dict[str, Any], response: dict[str, Any]):
        """The reset's reply, from another replica while this one is full or draining."""
        pool = self._endpoints
        for _ in range(len(pool.urls) - 1 if pool is not None else 0):
            if not _refused_session(response) or pool is None or self._base_url is None:
                break
            pool.failed(self._base_url)
            if self._ws is not None:
                self._schedule_socket_close(self._ws)
            self._ws, self._ws_loop = None, None
            response = await self._exchange(message)
        return response

    # ── resuming a dropped connection ───────────────────────────────────────
    def _set_base_url(self, base_url: str) -> None:
        super()._set_base_url(base_url)
        # The base's _set_base_url has just set _ws_url to the "/ws" address.
        self._plain_ws_url: str = cast(str, self._ws_url)
        if self._resume:
            self._ws_url = f"{self._ws_url}?resume=1"

    def _socket_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = dict(
            open_timeout=self._connect_timeout,
            max_size=self._max_message_size,
            ping_interval=self._websocket_ping_interval_s,
            ping_timeout=self._websocket_ping_timeout_s,
            additional_headers=self._headers,
        )
        if is_loopback_url(self._plain_ws_url):
            kwargs["proxy"] = None
        return kwargs

    async def _resume_socket(
        self, dropped_at: float, ticket: ResumeTicket
    ) -> dict[str, Any] | None:
        """Swap in a socket attached to the same episode; the missed step reply, if any."""
        old = self._ws
        self._ws, self._ws_loop = None, None
        if old is not None:
            self._schedule_socket_close(old)
        ws, missed = await resume_episode(
            self._plain_ws_url,
            ticket,
            self._socket_kwargs(),
            dropped_at,
            self._backoff,
            self._message_timeout,
        )
        self._ws, self._ws_loop = ws, asyncio.get_running_loop()
        self.resumes += 1
        return missed

    def _socket_is_gone(self) -> bool:
        return self._ws is None or self._ws.state in (SocketState.CLOSING, SocketState.CLOSED)

    async def _exchange(self, message: dict[str, Any], resumed: bool = False) -> dict[str, Any]:
        """Send and read the reply; ``resumed``: on the episode's socket as it is, not a new one."""
        if not resumed:
            await self._ensure_connected()
        ws = self._ws
        if ws is None:  # _ensure_connected or _resume_socket has just set it
            raise RuntimeError("no WebSocket connection to send on")
        try:
            await ws.send(json.dumps(message))
        except ConnectionClosed:
            pass  # a refusal (error frame, then close) may be queued: _receive returns it or raises
        return await self._receive()

    async def _send_and_receive(self, message: dict[str, Any]) -> dict[str, Any]:
        """One request and its reply; a dropped connection is resumed unnoticed by the caller."""
        kind = message.get("type")
        ticket = self._ticket
        if kind == "reset" or ticket is None:
            response = await self._reset_or_plain(message)
        else:
            response = await self._resumable(message, ticket)
        if response.get("type") == "error":
            data = response.get("data", {})
            raise RuntimeError(
                f"Server error: {data.get('message', 'Unknown error')} "
                f"(code: {data.get('code', 'UNKNOWN')})"
            )
        return response

    async def _reset_or_plain(self, message: dict[str, Any]) -> dict[str, Any]:
        try:
            response = await self._exchange(message)
        except DROPS:
            if not (self._resume and message.get("type") == "reset"):
                raise
            # A reset cut off is sent again on a new connection: it starts a new episode
            # either way (one the server ran meanwhile is closed after its grace period).
            self._ws, self._ws_loop = None, None
            response = await self._exchange(message)
        if message.get("type") == "reset" and self._endpoints is not None:
            response = await self._reset_elsewhere(message, response)
        if message.get("type") == "reset" and response.get("type") == "observation":
            self._ticket = ResumeTicket.from_reset(response.get("data", {}), self._default_grace_s)
        return response

    async def _resumable(self, message: dict[str, Any], ticket: ResumeTicket) -> dict[str, Any]:
        if self._socket_is_gone():  # dropped while idle: nothing of ours is in flight
            if await self._resume_socket(time.monotonic(), ticket) is not None:
                ticket.steps_seen += 1  # a reply to a step given up on earlier (a timeout)
        while True:
            try:
                response = await self._exchange(message, resumed=True)
                break
            except DROPS:
                missed = await self._resume_socket(time.monotonic(), ticket)
                if missed is not None and message.get("type") == "step":
                    response = missed
                    break
        if message.get("type") == "step":
            ticket.steps_seen += 1
        return response

    async def _disconnect_async(self) -> None:
        self._ticket = None  # a deliberate close ends the episode on the server
        await super()._disconnect_async()

    def _step_payload(self, action: Action) -> dict[str, Any]:
        if isinstance(action, ListToolsAction):
            return {"type": "list_tools"}
        return action.model_dump(exclude={"metadata"})

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[Observation]:
        obs = dict(payload.get("observation", {}))
        obs.update(done=payload.get("done", False), reward=payload.get("reward"))
        if "instruction" in obs:
            observation: Observation = AnalystResetObservation.model_validate(obs)
        elif "tools" in obs:
            observation = ListToolsObservation.model_validate(obs)
        else:
            observation = AnalystToolObservation.model_validate(obs)
        return StepResult(
            observation=observation,
            reward=payload.get("reward"),
            done=payload.get("done", False),
            metadata=payload.get("metadata"),
        )

    def _parse_state(self, payload: dict[str, Any]) -> AnalystState:
        return AnalystState.model_validate(payload)

    # ── one call per tool ───────────────────────────────────────────────────
    def call_tool(self, name: str, /, **arguments: Any) -> Any:
        """Call tool ``name`` as one step."""
        return self.step(CallToolAction(tool_name=name, arguments=arguments))

    def list_tools(self) -> Any:
        """The tool catalogue, as one step."""
        return self.step(ListToolsAction())

    def add_and_execute_code_cell(self, code: str) -> Any:
        return self.call_tool("add_and_execute_code_cell", code=code)

    def edit_and_execute_current_cell(self, code: str) -> Any:
        return self.call_tool("edit_and_execute_current_cell", code=code)

    def execute_shell_command(self, command: str) -> Any:
        return self.call_tool("execute_shell_command", command=command)

    def run_sql(self, query: str) -> Any:
        return self.call_tool("run_sql", query=query)

    def list_files(self) -> Any:
        return self.call_tool("list_files")

    def get_notebook_state(self, include_images: bool = False) -> Any:
        return self.call_tool("get_notebook_state", include_images=include_images)

    def final_answer(self, answer: str) -> Any:
        return self.call_tool("final_answer", answer=answer)


def _refused_session(response: dict[str, Any]) -> bool:
    """Whether a reply says this server takes no new session now (full, or shutting down)."""
    if response.get("type") != "error":
        return False
    data = response.get("data") or {}
    if data.get("code") == "CAPACITY_REACHED" or data.get("draining") is True:
        return True
    # Servers before the ``draining`` field said it only in words.
    return data.get("code") == "SESSION_ERROR" and "shutting down" in str(data.get("message"))
