"""Turn recorded trajectories into Jupyter notebooks and chat-format SFT records.

The server records every episode to ``<state_dir>/trajectories/*.jsonl``
(``server/trajectories.py``). This module reads those files and writes:

- ``ipynb``: one notebook per episode: a markdown cell with the task, one code
  cell per tool call with its outputs (stdout/stderr streams, ``text/html``,
  ``image/png``, errors), and a markdown cell with the answer and reward.
  Shell commands become ``%%sh`` cells and SQL ``%%sql`` cells; an edit of the
  current cell replaces the previous code cell, as in the live notebook.
  Every notebook passes ``nbformat.validate``.
- ``sft``: one JSON line per episode in the OpenAI chat format used for agentic
  SFT (DataMind-style): ``system``, ``user`` (instruction and files), then
  ``assistant`` messages with ``tool_calls`` and the matching ``tool`` messages,
  plus ``tools`` (the function schemas), ``task_id``, ``episode_id`` and ``reward``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from analyst_env.prompts import SYSTEM_PROMPT, openai_tools, task_prompt
from analyst_env.trajectory_files import read_trajectory, trajectories_dir

FORMATS = ("ipynb", "sft")


def trajectory_files(state_dir: str | Path) -> list[Path]:
    """The trajectory files of a server's ``state_dir``, oldest first."""
    root = trajectories_dir(state_dir)
    return sorted(root.glob("*.jsonl")) if root.is_dir() else []


def _episode(
    records: list[dict[str, Any]],
) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any] | None]:
    """(reset record, step records, end record or None); raises ValueError without a reset."""
    resets = [r for r in records if r.get("type") == "reset"]
    if not resets:
        raise ValueError("the trajectory has no reset record")
    steps = [r for r in records if r.get("type") == "step"]
    end = next((r for r in records if r.get("type") == "end"), None)
    return resets[0], steps, end


def _text_of(observation: dict[str, Any]) -> str:
    if observation.get("error"):
        return f"Error: {observation['error'].get('message', '')}"
    result = observation.get("result")
    if isinstance(result, dict):
        return str(result.get("data", ""))
    if "tools" in observation:
        return json.dumps([t.get("name") for t in observation["tools"]])
    return "" if result is None else str(result)


# ── notebooks ──────────────────────────────────────────────────────────────────
def _outputs(cell: dict[str, Any] | None, text: str) -> list[Any]:
    import nbformat.v4 as nbf

    if cell is None:  # a step without a notebook cell (list_files, an error): its text
        return [nbf.new_output("stream", name="stdout", text=text)] if text else []
    outputs: list[Any] = []
    if cell.get("stdout"):
        outputs.append(nbf.new_output("stream", name="stdout", text=cell["stdout"]))
    if cell.get("stderr"):
        outputs.append(nbf.new_output("stream", name="stderr", text=cell["stderr"]))
    for bundle in cell.get("outputs") or []:
        data = {k: v for k, v in bundle.items() if isinstance(v, (str, dict, list))}
        if data:
            outputs.append(
                nbf.new_output(
                    "execute_result", data=data, execution_count=cell.get("execution_count")
                )
            )
    if cell.get("error"):
        err = cell["error"]
        outputs.append(
            nbf.new_output(
                "error",
                ename=str(err.get("name", "Error")),
                evalue=str(err.get("value", "")),
                traceback=[str(line) for line in err.get("traceback") or []],
            )
        )
    return outputs


def _source(tool: str, arguments: dict[str, Any]) -> str:
    if tool in ("add_and_execute_code_cell", "edit_and_execute_current_cell"):
        return str(arguments.get("code", ""))
    if tool == "execute_shell_command":
        return f"%%sh\n{arguments.get('command', '')}"
    if tool == "run_sql":
        return f"%%sql\n{arguments.get('query', '')}"
    args = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
    return f"# {tool}({args})"


def to_notebook(records: list[dict[str, Any]]) -> Any:
    """The episode of ``records`` as an ``nbformat`` v4 notebook (validated).

    Raises:
        ValueError: ``records`` has no reset record.
    """
    import nbformat
    import nbformat.v4 as nbf

    reset, steps, end = _episode(records)
    obs = reset["observation"]
    nb = nbf.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.metadata["analyst_env"] = {
        "task_id": reset["task_id"],
        "episode_id": reset["episode_id"],
        "seed": reset.get("seed"),
    }
    nb.cells.append(
        nbf.new_markdown_cell(
            f"# Task `{reset['task_id']}`\n\n"
            f"{task_prompt(obs.get('instruction', ''), obs.get('files', []))}"
        )
    )
    last_code: int | None = None
    for step in steps:
        action = step["action"]
        tool = action.get("tool_name")
        if tool is None:  # list_tools
            continue
        arguments = action.get("arguments") or {}
        if tool == "final_answer":
            continue
        cell = nbf.new_code_cell(
            _source(tool, arguments),
            execution_count=(step.get("cell") or {}).get("execution_count"),
            outputs=_outputs(step.get("cell"), _text_of(step["observation"])),
            metadata={
                "analyst_env": {
                    "tool": tool,
                    "step": step["index"],
                    "duration_s": step.get("duration_s"),
                }
            },
        )
        if tool == "edit_and_execute_current_cell" and last_code is not None and step.get("cell"):
            nb.cells[last_code] = cell
        else:
            nb.cells.append(cell)
        if tool in ("add_and_execute_code_cell", "edit_and_execute_current_cell") and step.get(
            "cell"
        ):
            last_code = len(nb.cells) - 1 if nb.cells[-1] is cell else last_code
    if end is not None:
        nb.cells.append(
            nbf.new_markdown_cell(
                f"**Final answer:** `{end.get('submitted_answer')}`  \n"
                f"**Reward:** {end.get('reward')} ({end.get('end_reason')}, "
                f"{end.get('step_count')} steps)"
            )
        )
    nbformat.validate(nb)
    return nb


# ── SFT records ────────────────────────────────────────────────────────────────
def to_sft(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The episode of ``records`` as one chat-format SFT record with tool calls.

    Raises:
        ValueError: ``records`` has no reset record.
    """
    reset, steps, end = _episode(records)
    obs = reset["observation"]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": task_prompt(obs.get("instruction", ""), obs.get("files", []))},
    ]
    for step in steps:
        action = step["action"]
        name = action.get("tool_name")
        if name is None:
            continue
        call_id = f"call_{step['index']}"
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {
                            "name": name,
                            "arguments": json.dumps(
                                action.get("arguments") or {}, ensure_ascii=False
                            ),
                        },
                    }
                ],
            }
        )
        messages.append(
            {
                "role": "tool",
                "tool_call_id": call_id,
                "name": name,
                "content": _text_of(step["observation"]),
            }
        )
    return {
        "messages": messages,
        "tools": openai_tools(obs.get("available_tools", [])),
        "task_id": reset["task_id"],
        "episode_id": reset["episode_id"],
        "reward": (end or {}).get("reward"),
        "end_reason": (end or {}).get("end_reason"),
    }


def export(
    state_dir: str | Path, fmt: str, out: str | Path, *, files: Iterable[Path] | None = None
) -> list[Path]:
    """Export the trajectories of ``state_dir`` in ``fmt`` into directory ``out``.

    Args:
        state_dir: The server's state directory.
        fmt: ``ipynb`` (one ``<episode>.ipynb`` each) or ``sft`` (``sft.jsonl``, one line per
            episode).
        out: Output directory (created).
        files: Only these trajectory files (default: all of ``state_dir``).

    Returns:
        The files written.

    Raises:
        ValueError: Unknown format.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; choose from {', '.join(FORMATS)}")
    import nbformat

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = list(files) if files is not None else trajectory_files(state_dir)
    written: list[Path] = []
    sft_lines: list[str] = []
    for path in paths:
        records = read_trajectory(path)
        if not any(r.get("type") == "reset" for r in records):
            continue  # an empty or torn file
        if fmt == "ipynb":
            target = out / f"{path.stem}.ipynb"
            nbformat.write(to_notebook(records), str(target))
            written.append(target)
        else:
            sft_lines.append(json.dumps(to_sft(records), ensure_ascii=False))
    if fmt == "sft":
        target = out / "sft.jsonl"
        target.write_text("".join(line + "\n" for line in sft_lines), encoding="utf-8")
        written.append(target)
    return written
