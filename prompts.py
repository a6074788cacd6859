"""What a model reads at the start of an episode, shared by every trainer adapter.

TRL, SkyRL, the SFT exporter and the Harbor exporter all turn a reset
observation (instruction plus file previews) into the same prompt text, and the
server's tool catalog into the same OpenAI-style function list, so a model
trained through one path sees the same task text through the others. It sits at
the package root, below the server and the adapters: the server counts these texts
among what every episode shows (``server/shown_text.py``).
"""

from __future__ import annotations

import json
from typing import Any

SYSTEM_PROMPT = (
    "You are a data analyst. Answer the question by working with the files in your working "
    "directory using the tools: run Python in a persistent notebook (pandas, numpy, duckdb, "
    "matplotlib), SQL, or shell commands. When you know the answer, call final_answer once "
    "with exactly what the question asks for, in its required format."
)


def describe_files(files: list[Any]) -> str:
    """One line per input file: name, kind, size and the columns/tables/sheets preview.

    Args:
        files: ``FileInfo`` models or their dicts (``name``, ``kind``, ``size_bytes``, ``preview``).
    """
    lines = []
    for f in files:
        f = f.model_dump() if hasattr(f, "model_dump") else dict(f)
        line = f"- {f['name']} ({f.get('kind', 'other')}, {f.get('size_bytes', 0)} bytes)"
        preview = f.get("preview") or {}
        if "columns" in preview:
            line += (
                f": {preview.get('rows', '?')} rows; columns "
                f"{', '.join(map(str, preview['columns']))}"
            )
        for key in ("tables", "sheets"):
            for name, part in (preview.get(key) or {}).items():
                cols = ", ".join(map(str, part.get("columns", [])))
                line += f"\n  - {key[:-1]} {name}: {part.get('rows', '?')} rows; columns {cols}"
        lines.append(line)
    return "\n".join(lines)


def task_prompt(instruction: str, files: list[Any]) -> str:
    """The task as the model reads it: the instruction, then the files it can use."""
    text = instruction.strip()
    if files:
        text += "\n\nFiles in your working directory:\n" + describe_files(files)
    return text


def openai_tools(specs: list[Any]) -> list[dict[str, Any]]:
    """The server's tool specs (``name``, ``description``, ``input_schema``) as OpenAI function
    tools."""
    tools = []
    for spec in specs:
        spec = spec.model_dump() if hasattr(spec, "model_dump") else dict(spec)
        schema = (
            spec.get("input_schema")
            or spec.get("inputSchema")
            or {"type": "object", "properties": {}}
        )
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": spec["name"],
                    "description": spec.get("description", ""),
                    "parameters": schema,
                },
            }
        )
    return tools


def hermes_tools_prompt(specs: list[Any]) -> str:
    """A Hermes/Qwen-style system prompt listing the tools and the ``<tool_call>`` syntax.

    For trainers that do not pass ``tools=`` to the chat template (SkyRL's generator):
    the model learns the tools from this text and answers with
    ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.
    """
    listed = "\n".join(json.dumps(t, ensure_ascii=False) for t in openai_tools(specs))
    return (
        f"{SYSTEM_PROMPT}\n\n# Tools\n\nYou may call one or more functions to assist with the "
        "user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML "
        f"tags:\n<tools>\n{listed}\n</tools>\n\n"
        "For each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    )
