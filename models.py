"""Wire types of analyst_env: what crosses the OpenEnv protocol.

Actions are OpenEnv's own MCP actions (``CallToolAction`` / ``ListToolsAction``),
so any OpenEnv client can drive the environment unchanged. This module adds the
typed observations and the state that the server sends back. Client and server
both import it; it must never import from ``server/``.

Nothing in here ever carries a task's ground truth.
"""

from __future__ import annotations

from typing import Any, Literal

from analyst_env.openenv_compat import load_openenv_wire

load_openenv_wire()  # openenv's wire types without its server stack (FastAPI, FastMCP)

from openenv.core.env_server.mcp_types import (  # noqa: E402
    CallToolAction,
    CallToolObservation,
    ListToolsAction,
)
from openenv.core.env_server.types import Observation, State  # noqa: E402
from pydantic import BaseModel, ConfigDict, Field  # noqa: E402

__all__ = [
    "CallToolAction",
    "ListToolsAction",
    "FileInfo",
    "ToolSpec",
    "NotebookCell",
    "AnalystResetObservation",
    "AnalystToolObservation",
    "AnalystState",
]

FileKind = Literal["csv", "sqlite", "excel", "json", "text", "other"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FileInfo(_Strict):
    """One input file of the task, as the agent sees it in its working directory."""

    name: str = Field(description="Path relative to the episode's working directory")
    kind: FileKind = Field(description="File type, guessed from the extension")
    size_bytes: int = Field(ge=0, description="File size in bytes")
    preview: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "Shape of the data: for CSV {'columns': [...], 'rows': n}; for SQLite "
            "{'tables': {name: {'columns': [...], 'rows': n}}}; for Excel "
            "{'sheets': {name: {'columns': [...], 'rows': n}}}"
        ),
    )


class ToolSpec(_Strict):
    """A tool the agent may call, with the JSON Schema of its arguments."""

    name: str
    description: str
    input_schema: dict[str, Any] = Field(default_factory=dict)


class NotebookCell(_Strict):
    """One executed cell of the episode's notebook (code, shell or SQL)."""

    cell_id: int = Field(ge=0, description="Position of the cell in the notebook")
    cell_type: Literal["code", "shell", "sql"]
    source: str = Field(description="The code, shell command or SQL query that ran")
    execution_count: int | None = Field(default=None, description="IPython execution count")
    stdout: str = ""
    stderr: str = ""
    outputs: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Rich results as Jupyter mime bundles ({'text/plain': ..., 'image/png': ...})",
    )
    error: dict[str, Any] | None = Field(
        default=None, description="{'name', 'value', 'traceback'} if the cell raised"
    )
    success: bool = True


class AnalystResetObservation(Observation):
    """What ``reset`` returns: the task, its files and the tools to solve it with."""

    episode_id: str = Field(description="Id of the episode that just started")
    task_id: str = Field(description="Id of the task being served")
    instruction: str = Field(description="The question to answer, with the answer format")
    files: list[FileInfo] = Field(default_factory=list, description="The task's input files")
    available_tools: list[ToolSpec] = Field(
        default_factory=list, description="Tools callable with CallToolAction"
    )
    max_steps: int = Field(ge=1, description="Steps allowed before the episode ends with reward 0")
    status: Literal["ready", "error"] = Field(
        default="ready", description="'error' if the sandbox or a setup hook failed"
    )
    message: str = Field(default="", description="Human-readable status, e.g. a setup failure")


class AnalystToolObservation(CallToolObservation):
    """What a tool call returns: OpenEnv's ``CallToolObservation`` plus the step count.

    ``result`` has the shape of an MCP ``CallToolResult``: ``content`` (text and
    image blocks for the model), ``structured_content`` (the same result as data),
    ``data`` (the text) and ``is_error``.
    """

    step_count: int = Field(default=0, ge=0, description="Steps taken in this episode so far")

    @property
    def text(self) -> str:
        """What the model reads: the tool's text, or the error message."""
        if self.error is not None:
            return f"Error: {self.error.message}"
        if isinstance(self.result, dict):
            return str(self.result.get("data", ""))
        return "" if self.result is None else str(self.result)


class AnalystState(State):
    """Episode state, as returned by the ``state`` frame. Free of ground truth."""

    task_id: str | None = Field(default=None, description="Id of the current task")
    cells: list[NotebookCell] = Field(default_factory=list, description="The notebook so far")
    done: bool = Field(default=False, description="Whether the episode has ended")
    reward: float | None = Field(default=None, description="Final reward once done")
    submitted_answer: str | None = Field(
        default=None, description="The answer given to final_answer, if any"
    )
    max_steps: int | None = Field(default=None, description="Step limit of the current task")
