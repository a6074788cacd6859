"""Who plays an evaluation episode: a model behind a chat endpoint, or a scripted policy.

Every policy answers the same question, "given the conversation so far, what
is the next assistant turn?", with a :class:`~analyst_env.evaluation.chat_client.ChatReply`,
so :func:`analyst_env.evaluation.agent_loop.play_episode` runs them all alike.

- :class:`ModelPolicy` asks a chat-completions endpoint, offering the tools
  natively or (``tool_format="text"``) through the Hermes ``<tools>`` system
  prompt the SkyRL adapter uses.
- :class:`ScriptedPolicy` plays ``oracle`` (the task's known-good tool calls,
  then its gold answer, read locally from the dataset) or ``null`` (an empty
  answer): the checks that a dataset is solvable and cannot be gamed by silence.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from analyst_env.datasets import Task
from analyst_env.evaluation.chat_client import ChatClient, ChatReply
from analyst_env.prompts import SYSTEM_PROMPT, hermes_tools_prompt, openai_tools
from analyst_env.task_format import ToolCall

SCRIPTS: dict[str, Callable[[Task], tuple[list[ToolCall], str]]] = {
    "oracle": lambda task: (list(task.oracle_steps), task.oracle_answer),
    "null": lambda task: ([], ""),
}
"""Each scripted policy maps a task to (tool calls to make, answer to submit)."""


class ModelPolicy:
    """A model on an OpenAI-compatible endpoint.

    Args:
        chat: The endpoint's client (opened by the caller).
        tool_format: ``"native"`` sends the tool catalogue as ``tools``; ``"text"``
            lists it in the system prompt and reads ``<tool_call>`` blocks.
    """

    def __init__(self, chat: ChatClient, tool_format: str) -> None:
        if tool_format not in ("native", "text"):
            raise ValueError(f"tool_format must be 'native' or 'text', not {tool_format!r}")
        self.chat = chat
        self.tool_format = tool_format
        self.name = chat.model

    def system_prompt(self, specs: list[Any]) -> str:
        """The system turn: the trainers' prompt, plus the tool listing in text mode."""
        return hermes_tools_prompt(specs) if self.tool_format == "text" else SYSTEM_PROMPT

    def tools(self, specs: list[Any]) -> list[dict[str, Any]] | None:
        return openai_tools(specs) if self.tool_format == "native" else None

    async def reply(
        self, task: Task, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> ChatReply:
        return await self.chat.complete(messages, tools)


class ScriptedPolicy:
    """``oracle`` or ``null``, as native tool calls; gives up when one of its steps fails."""

    tool_format = "native"

    def __init__(self, name: str) -> None:
        if name not in SCRIPTS:
            raise ValueError(f"unknown policy {name!r}; choose from {sorted(SCRIPTS)}")
        self.name = name
        self._script = SCRIPTS[name]

    def system_prompt(self, specs: list[Any]) -> str:
        return SYSTEM_PROMPT

    def tools(self, specs: list[Any]) -> list[dict[str, Any]] | None:
        return openai_tools(specs)

    async def reply(
        self, task: Task, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> ChatReply:
        steps, answer = self._script(task)
        plan = [*steps, ToolCall(tool="final_answer", arguments={"answer": answer})]
        turn = sum(1 for m in messages if m["role"] == "assistant")
        last = messages[-1]
        if turn and last["role"] == "tool" and str(last["content"]).startswith("Error"):
            return ChatReply(error=f"step {plan[turn - 1].tool} failed: {last['content']}")
        if turn >= len(plan):
            return ChatReply(content="the script is over")
        step = plan[turn]
        call = {
            "id": f"call_{turn}",
            "type": "function",
            "function": {"name": step.tool, "arguments": json.dumps(step.arguments)},
        }
        return ChatReply(tool_calls=[call], finish_reason="tool_calls")
