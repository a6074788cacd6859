"""The agent's tools: a notebook, a shell, SQL, file listing and the final answer.

Names and arguments follow OpenEnv's ``jupyter_env`` so its prompts and agents
carry over; ``run_sql`` and ``list_files`` are additions. Each docstring is the
description the model reads, so it says when to use the tool and what comes back.

Every tool is a plain function ``(episode, **arguments) -> ToolOutput``. The
``@tool`` decorator derives a strict pydantic model of the arguments from the
signature; the environment validates every call against it, whichever path the
call came in on (a ``/ws`` step or ``/mcp`` ``tools/call``).
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from analyst_env.envs.kernel_helpers import LIST_FILES_CALL, sql_call
from analyst_env.envs.loop_bridge import offload
from analyst_env.models import NotebookCell, ToolSpec
from analyst_env.server.episode import Episode
from analyst_env.server.helper_replies import FileList, SqlFailure, SqlRows, read_reply
from analyst_env.server.rendering import (
    clip,
    images_of,
    render_cell,
    render_shell,
    render_table,
    summarize_notebook,
)
from analyst_env.server.verification import verify_answer


@dataclass
class ToolOutput:
    """What a tool produced: text for the model, images, and the same result as data."""

    text: str
    data: dict[str, Any] = field(default_factory=dict)
    images: list[str] = field(default_factory=list)
    is_error: bool = False

    def as_call_tool_result(self) -> dict[str, Any]:
        """The MCP ``CallToolResult`` shape (as FastMCP dumps it) that clients unwrap."""
        content: list[dict[str, Any]] = [{"type": "text", "text": self.text}]
        content += [{"type": "image", "data": img, "mimeType": "image/png"} for img in self.images]
        return {
            "content": content,
            "structured_content": self.data or {"result": self.text},
            "data": self.text,
            "is_error": self.is_error,
        }


@dataclass(frozen=True)
class ToolDef:
    """A registered tool: its function, its argument model and its public spec."""

    name: str
    description: str
    args_model: type[BaseModel]
    run: Callable[..., ToolOutput]

    def spec(self) -> ToolSpec:
        """The public spec (name, description, JSON Schema), computed once per tool."""
        return _spec_of(self)

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Check ``arguments``; raise ``ValueError`` with a message the caller can act on."""
        try:
            return dict(self.args_model.model_validate(arguments))
        except ValidationError as exc:
            problems = []
            for err in exc.errors():
                where = ".".join(str(p) for p in err["loc"]) or "arguments"
                if err["type"] == "extra_forbidden":
                    problems.append(f"unexpected argument '{where}'")
                elif err["type"] == "missing":
                    problems.append(f"missing required argument '{where}'")
                else:
                    got = type(err.get("input")).__name__
                    problems.append(f"'{where}': {err['msg']} (got {got})")
            expected = ", ".join(
                f"{name}: {prop.get('type', 'any')}"
                for name, prop in self.spec().input_schema.get("properties", {}).items()
            )
            raise ValueError(
                f"Invalid arguments for {self.name}: {'; '.join(problems)}. "
                f"Expected {{{expected}}}."
            ) from None


TOOLS: dict[str, ToolDef] = {}


@functools.cache
def _spec_of(tool: ToolDef) -> ToolSpec:
    schema = tool.args_model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return ToolSpec(name=tool.name, description=tool.description, input_schema=schema)


def tool(fn: Callable[..., ToolOutput]) -> Callable[..., ToolOutput]:
    """Register ``fn`` as a tool; its parameters after ``episode`` are the arguments."""
    params = list(inspect.signature(fn).parameters.values())[1:]
    fields: dict[str, Any] = {
        p.name: (p.annotation, ... if p.default is inspect.Parameter.empty else p.default)
        for p in params
    }
    args_model = create_model(
        f"{fn.__name__}_arguments",
        __config__=ConfigDict(extra="forbid", strict=True),
        **fields,
    )
    TOOLS[fn.__name__] = ToolDef(fn.__name__, inspect.cleandoc(fn.__doc__ or ""), args_model, fn)
    return fn


Code = Annotated[str, Field(description="Python source to run in the notebook kernel")]


def _shown_outputs(episode: Episode, outputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rich outputs as the agent is shown them, within the episode's output budget.

    Text values are cut to the tool-output limit (the model reads no more, so no
    more is kept in the notebook, the trajectory or the live view); once the
    episode's budget is spent, every further output becomes a note.
    """
    limit = episode.limits.output_limit_chars
    shown = []
    for bundle in outputs:
        kept: dict[str, Any] = {}
        for mime, value in bundle.items():
            if isinstance(value, str) and not mime.startswith("image/"):
                value = clip(value, limit)
            size = len(value) if isinstance(value, str) else len(json.dumps(value))
            if episode.output_bytes + size > episode.limits.episode_output_limit_bytes:
                kept = {
                    "text/plain": "[output dropped: this episode has used its "
                    f"{episode.limits.episode_output_limit_bytes // 2**20} MiB of rich outputs]"
                }
                break
            episode.output_bytes += size
            kept[mime] = value
        shown.append(kept)
    return shown


def _run_code_cell(episode: Episode, code: str) -> ToolOutput:
    result = episode.require_sandbox().run_cell(code, timeout_s=episode.limits.cell_timeout_s)
    result = result.model_copy(update={"outputs": _shown_outputs(episode, result.outputs)})
    cell = episode.add_cell(
        NotebookCell(
            cell_id=0,
            cell_type="code",
            source=code,
            execution_count=result.execution_count,
            stdout=clip(result.stdout, episode.limits.output_limit_chars),
            stderr=clip(result.stderr, episode.limits.output_limit_chars),
            outputs=result.outputs,
            error=result.error.model_dump() if result.error else None,
            success=result.success,
        )
    )
    data = cell.model_dump(exclude={"outputs"})
    data.update(timed_out=result.timed_out, kernel_restarted=result.kernel_restarted)
    return ToolOutput(
        text=render_cell(result, episode.limits.output_limit_chars),
        data=data,
        images=images_of(result.outputs),
        is_error=not result.success,
    )


@tool
def add_and_execute_code_cell(episode: Episode, code: Code) -> ToolOutput:
    """Add a new code cell to the notebook and run it in the persistent Python kernel.

    Use this as the primary tool for all computation: loading files with pandas,
    exploring data, computing results, plotting with matplotlib. Variables,
    imports and files persist between cells. pandas, numpy, duckdb, matplotlib,
    openpyxl and sqlite3 are installed; the task's files are in the current
    working directory. The cell is interrupted after the time limit. Long
    outputs are cut with a note (print summaries, not whole tables), and an
    episode keeps at most 16 MiB of plots and HTML in all.

    Args:
        code: Python source to run. IPython syntax works (e.g. `!ls`, `%time`).

    Returns:
        stdout, the value of the last expression, `[Image output: n image(s)]`
        for plots, and on failure `ERROR:` with the exception and traceback.
    """
    return _run_code_cell(episode, code)


@tool
def edit_and_execute_current_cell(episode: Episode, code: Code) -> ToolOutput:
    """Replace the most recent code cell with new code and run it.

    Use this to fix a cell that failed, instead of adding a new one, so the
    notebook stays clean. Effects of the old version that already happened
    (variables it set, files it wrote) are not undone.

    Args:
        code: The corrected Python source.

    Returns:
        The same as add_and_execute_code_cell.
    """
    if not episode.cells or episode.cells[-1].cell_type != "code":
        return ToolOutput(
            text="Error: there is no code cell to edit yet; use add_and_execute_code_cell first.",
            is_error=True,
        )
    episode.cells.pop()
    return _run_code_cell(episode, code)


@tool
def execute_shell_command(
    episode: Episode,
    command: Annotated[str, Field(description="Shell command, run with /bin/sh")],
) -> ToolOutput:
    """Run a shell command in the episode's working directory.

    Use this for file-system work: listing or inspecting files (`ls -la`,
    `head -n 5 data.csv`, `wc -l`), unzipping, or running a script. Each command
    runs in a fresh shell; use the notebook for anything stateful.

    Args:
        command: The command line, e.g. `head -n 3 sales.csv`.

    Returns:
        stdout, then `STDERR:` and the exit code if it failed.
    """
    result = episode.require_sandbox().run_shell(command, timeout_s=episode.limits.shell_timeout_s)
    limit = episode.limits.output_limit_chars
    episode.add_cell(
        NotebookCell(
            cell_id=0,
            cell_type="shell",
            source=command,
            stdout=clip(result.stdout, limit),
            stderr=clip(result.stderr, limit),
            success=result.exit_code == 0,
        )
    )
    return ToolOutput(
        text=render_shell(result, limit),
        data=result.model_dump(),
        is_error=result.exit_code != 0,
    )


@tool
def run_sql(
    episode: Episode,
    query: Annotated[str, Field(description="One SQL statement")],
) -> ToolOutput:
    """Run one SQL query against the task's data and show the result as a table.

    Use this for quick questions a query answers directly. If the working
    directory holds a SQLite database, the query runs in SQLite against it.
    Otherwise it runs in DuckDB, where every CSV file is a view and every Excel
    sheet a table, named after the file (lower case, non-letters as `_`;
    `<file>_<sheet>` for workbooks with several sheets).

    Args:
        query: e.g. `SELECT region, SUM(amount) FROM sales GROUP BY region`.

    Returns:
        A pipe-separated table of at most 50 rows, or `SQL error:` with the reason.
    """
    limits = episode.limits
    result = episode.require_sandbox().run_cell(
        sql_call(query, limits.sql_max_rows), timeout_s=limits.cell_timeout_s, silent=True
    )
    reply = read_reply(result.stdout, SqlRows, SqlFailure)
    if not isinstance(reply, SqlRows):
        reason = (reply.error if isinstance(reply, SqlFailure) else "") or (
            result.error.value if result.error else "the query did not complete"
        )
        text = f"SQL error: {reason}"
        episode.add_cell(
            NotebookCell(cell_id=0, cell_type="sql", source=query, stderr=text, success=False)
        )
        return ToolOutput(text=clip(text, limits.output_limit_chars), is_error=True)
    text = render_table(reply.columns, reply.rows, reply.truncated, limits.output_limit_chars)
    episode.add_cell(NotebookCell(cell_id=0, cell_type="sql", source=query, stdout=text))
    return ToolOutput(text=text, data=reply.model_dump(exclude={"ok"}))


@tool
def list_files(episode: Episode) -> ToolOutput:
    """List the files in the working directory (the task's data and anything you wrote).

    Returns:
        One line per file: its path relative to the working directory and its size.
    """
    result = episode.require_sandbox().run_cell(
        LIST_FILES_CALL, timeout_s=episode.limits.cell_timeout_s, silent=True
    )
    reply = read_reply(result.stdout, FileList)
    if not isinstance(reply, FileList):
        return ToolOutput(text="Error: could not list files.", is_error=True)
    text = "\n".join(f"{f.name}  ({f.size_bytes} bytes)" for f in reply.files) or "(no files)"
    return ToolOutput(
        text=clip(text, episode.limits.output_limit_chars), data=reply.model_dump(exclude={"ok"})
    )


@tool
def get_notebook_state(
    episode: Episode,
    include_images: Annotated[
        bool, Field(description="Include plots as base64 PNG data URIs")
    ] = False,
) -> ToolOutput:
    """Summarize the notebook so far: the last 10 cells with their code, output and errors.

    Use this to recall what you already computed before deciding the next step.

    Args:
        include_images: Also return the plots of those cells as images (large); default false.

    Returns:
        One block per cell: `[Cell n] code`, `→ output`, `✗ error`, `🖼 k image(s)`.
    """
    shown = episode.cells[-10:]
    images = [img for cell in shown for img in images_of(cell.outputs)] if include_images else []
    return ToolOutput(
        text=clip(summarize_notebook(episode.cells), episode.limits.output_limit_chars),
        data={"cells": [c.model_dump(exclude={"outputs"}) for c in shown]},
        images=images,
    )


@tool
def final_answer(
    episode: Episode,
    answer: Annotated[str, Field(description="The final answer, in the format the task asks for")],
) -> ToolOutput:
    """Submit your final answer. This ends the episode; no tool works afterwards.

    Call it once, when you are confident. Give exactly what the question asks
    for, in the format the question names (a number rounded as instructed, a
    comma-separated list, or `@name[value]` pairs when asked for them). State
    one answer: an answer that offers several candidates scores 0. Keep it
    short: an answer over the size limit (64 KiB by default) is not scored and
    gets reward 0.

    Args:
        answer: The answer text.

    Returns:
        A confirmation that the answer was recorded.
    """
    verdict = offload(verify_answer, episode, answer)  # a scoring child: never on the loop
    text = "Answer submitted. The episode is over."
    kept = answer
    if len(answer.encode()) > episode.limits.max_answer_bytes:
        text += f" It was not scored: {verdict.detail}"
        kept = answer[:1000]  # not the whole oversized answer back, in the state or on disk
    episode.submitted_answer = kept
    episode.finish(verdict.reward, "final_answer")
    episode.reward_breakdown = {"components": verdict.components, "detail": verdict.detail}
    return ToolOutput(text=text, data={"answer": kept, "reward": episode.reward})
