"""The two designs analyst_env is measured against, served by openenv's own app factory.

- ``JupyterKernelEnvironment``: the common design, one Jupyter kernel per episode
  started with ``jupyter_client``; reset starts a kernel, stages the task's CSV and
  warms pandas and duckdb; a cell is an ``execute`` round trip over ZeroMQ.
- ``NoopEnvironment``: the protocol floor, an environment that does nothing, so
  its latencies are openenv's server plus the network and nothing else.

Both accept the same frames as analyst_env (``reset`` with ``task_id``,
``call_tool`` steps for ``add_and_execute_code_cell`` and ``final_answer``), so
one client-side driver measures all three. Run with
``uvicorn --factory analyst_env.benchmarks.baselines:jupyter_app`` (or ``floor_app``).
"""

from __future__ import annotations

import os
import queue
import shutil
import tempfile
from typing import TYPE_CHECKING, Any

from analyst_env.openenv_compat import load_openenv

load_openenv()

from openenv.core.env_server.http_server import create_fastapi_app  # noqa: E402
from openenv.core.env_server.interfaces import Environment  # noqa: E402
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation  # noqa: E402
from openenv.core.env_server.types import Observation, State  # noqa: E402

if TYPE_CHECKING:  # a dev dependency, imported at the first reset
    from jupyter_client import BlockingKernelClient, KernelManager

MAX_SESSIONS = int(os.environ.get("BASELINE_MAX_SESSIONS", "1100"))
CSV_PATH_ENV = "BASELINE_TASK_CSV"


def _result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "data": text, "is_error": False}


class NoopEnvironment(Environment):
    """Answers every frame at once: what the protocol alone costs."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State()

    def reset(self, seed=None, episode_id=None, **kwargs: Any) -> Observation:
        self._state = State(episode_id=episode_id, step_count=0)
        return Observation(metadata={"status": "ready"})

    def step(self, action, timeout_s=None, **kwargs: Any) -> Observation:
        self._state.step_count += 1
        name = getattr(action, "tool_name", "")
        return CallToolObservation(tool_name=name, result=_result("2"), done=name == "final_answer")

    @property
    def state(self) -> State:
        return self._state


class JupyterKernelEnvironment(Environment):
    """One ipykernel per episode, driven with jupyter_client: the design analyst_env replaces."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State()
        self._manager: KernelManager | None = None
        self._client: BlockingKernelClient | None = None
        self._workdir: str | None = None

    def reset(self, seed=None, episode_id=None, **kwargs: Any) -> Observation:
        from jupyter_client import KernelManager

        self._shutdown()
        self._workdir = tempfile.mkdtemp(prefix="jupyter-baseline-")
        csv = os.environ.get(CSV_PATH_ENV)
        if csv:
            shutil.copy(csv, self._workdir)
        # ipc transport: tcp ports picked by many kernels starting at once can collide.
        self._manager = KernelManager(
            kernel_name="python3", transport="ipc", ip=os.path.join(self._workdir, "kernel")
        )
        self._manager.start_kernel(cwd=self._workdir)
        self._client = self._manager.client()
        self._client.start_channels()
        self._client.wait_for_ready(timeout=60)
        self._execute("import pandas as pd, duckdb")
        self._state = State(episode_id=episode_id, step_count=0)
        return Observation(metadata={"status": "ready"})

    def step(self, action, timeout_s=None, **kwargs: Any) -> Observation:
        self._state.step_count += 1
        if not isinstance(action, CallToolAction):
            return CallToolObservation(tool_name="", result=_result("unsupported"))
        if action.tool_name == "final_answer":
            return CallToolObservation(
                tool_name="final_answer", result=_result("done"), done=True, reward=0.0
            )
        text = self._execute(str(action.arguments.get("code", "")))
        return CallToolObservation(tool_name=action.tool_name, result=_result(text))

    @property
    def state(self) -> State:
        return self._state

    def close(self) -> None:
        self._shutdown()

    def _execute(self, code: str) -> str:
        if self._client is None:
            return "no kernel: reset first"
        msg_id = self._client.execute(code)
        out: list[str] = []
        while True:
            try:
                msg = self._client.get_iopub_msg(timeout=60)
            except queue.Empty:
                return "timeout"
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                out.append(content["text"])
            elif kind in ("execute_result", "display_data"):
                out.append(content["data"].get("text/plain", ""))
            elif kind == "error":
                out.append(f"{content['ename']}: {content['evalue']}")
            elif kind == "status" and content["execution_state"] == "idle":
                return "".join(out)

    def _shutdown(self) -> None:
        if self._client is not None:
            self._client.stop_channels()
            self._client = None
        if self._manager is not None:
            self._manager.shutdown_kernel(now=True)
            self._manager = None
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None


def _app(env_cls):
    return create_fastapi_app(
        env_cls, CallToolAction, CallToolObservation, max_concurrent_envs=MAX_SESSIONS
    )


def jupyter_app():
    """App factory for the Jupyter-kernel-per-episode baseline."""
    return _app(JupyterKernelEnvironment)


def floor_app():
    """App factory for the no-op protocol floor."""
    return _app(NoopEnvironment)
