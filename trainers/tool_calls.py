"""The text form of tool calling: ``<tool_call>{json}</tool_call>`` in, ``<tool_response>`` out.

Models without native tool calling (or served without a tool parser) write
their calls as Hermes/Qwen-style ``<tool_call>`` blocks in plain text, and read
the results as ``<tool_response>`` blocks in the next user turn. The SkyRL
adapter and ``analyst-env eval`` both speak this form through these two
functions, so a model evaluated in text mode sees what it is trained on.
"""

from __future__ import annotations

import json
import re
from typing import Any

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)


def parse_tool_calls(text: str) -> list[dict[str, Any] | str]:
    """The ``<tool_call>`` blocks of ``text``: a ``{"name", "arguments"}`` dict each, or an error.

    An error string takes the place of a block that is not valid JSON or not of
    the shape ``{"name": ..., "arguments": {...}}``, so the caller can answer it.

    >>> parse_tool_calls('<tool_call>{"name": "list_files", "arguments": {}}</tool_call>')
    [{'name': 'list_files', 'arguments': {}}]
    >>> parse_tool_calls('<tool_call>{"name": </tool_call>')[0].startswith('invalid JSON')
    True
    """
    calls: list[dict[str, Any] | str] = []
    for body in _TOOL_CALL.findall(text):
        try:
            call = json.loads(body)
        except json.JSONDecodeError as exc:
            calls.append(f"invalid JSON in <tool_call>: {exc}")
            continue
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            calls.append('a <tool_call> must be {"name": ..., "arguments": {...}}')
            continue
        args = call.get("arguments") or {}
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                calls.append("the arguments of a <tool_call> must be a JSON object")
                continue
        if not isinstance(args, dict):
            calls.append("the arguments of a <tool_call> must be a JSON object")
            continue
        calls.append({"name": call["name"], "arguments": args})
    return calls


def tool_responses_text(responses: list[str]) -> str:
    """The user turn that answers a turn's ``<tool_call>`` blocks, one block per response."""
    return "\n".join(f"<tool_response>\n{r}\n</tool_response>" for r in responses)
