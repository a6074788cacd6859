"""A stand-in for an OpenAI-compatible model server, playing scripted policies.

No model endpoint is reachable from the test machine, so this real HTTP server
(FastAPI under uvicorn on a loopback port) answers ``POST /v1/chat/completions``
the way vLLM or OpenAI do, and ``analyst-env eval`` talks to it with the very
client it uses for real endpoints. What it answers is a script, chosen with
:meth:`StandIn.use`; every request is kept in :attr:`StandIn.requests` so a test
can check what the model was shown (the prompt, the tools, the tool results).

The scripts know each task's gold (the test side reads it from the dataset);
they find the task by the instruction at the start of the first user turn. A script
in ``BLIND_SCRIPTS`` answers the same whatever the task, so it plays tasks it was
not given (a curriculum's picks).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from analyst_env.datasets import Task
from analyst_env.server.local_server import BackgroundServer
from analyst_env.trainers.tool_calls import parse_tool_calls

BLIND_SCRIPTS = frozenset({"wrong"})
"""Scripts that do not look at the task."""


class StandIn:
    """The stand-in server: ``with StandIn(tasks) as s: ... s.url + "/v1"``.

    Args:
        tasks: The tasks the scripts may be asked about (their gold answers).
    """

    def __init__(self, tasks: list[Task]) -> None:
        self.tasks = tasks
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.generation = 0  # counts use() calls: a request remembers the one it arrived under
        self.use("oracle")
        app = FastAPI()
        app.post("/v1/chat/completions")(self._complete)
        self._server = BackgroundServer(app)

    def use(
        self,
        script: str,
        *,
        native_tools: bool = True,
        delay_s: float = 0.0,
        fail_first: list[int] = (),
        hold_after: int | None = None,
    ) -> None:
        """Answer with ``script`` from now on; forget earlier requests.

        Args:
            native_tools: Accept a ``tools`` list (else answer it with a 400, like vLLM
                started without a tool parser).
            delay_s: Sleep this long before the first attempt at each turn.
            fail_first: HTTP statuses to answer the first attempts at each turn with.
            hold_after: Answer the first ``hold_after`` tasks asked about; hold every
                request about a later one unanswered until the next :meth:`use` (a
                run stopped there, whatever the machine's speed).
        """
        with self.lock:
            self.generation += 1
            self.script = script
            self.native_tools = native_tools
            self.delay_s = delay_s
            self.fail_first = list(fail_first)
            self.hold_after = hold_after
            self.tasks_asked: list[str] = []
            self.requests = []
            self.attempts: Counter[str] = Counter()

    def __enter__(self) -> StandIn:
        self.url = self._server.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.__exit__(*exc)

    def requests_for(self, task: Task) -> list[dict[str, Any]]:
        """The completion requests of the episodes of ``task``."""
        return [
            r
            for r in self.requests
            if _task_text(r["messages"]).startswith(task.instruction.strip())
        ]

    # ── the endpoint ──────────────────────────────────────────────────────────
    async def _complete(self, request: Request) -> JSONResponse:
        body = await request.json()
        messages = body["messages"]
        if self.script == "no-such-model":
            message = f"The model `{body.get('model')}` does not exist."
            return JSONResponse({"error": {"message": message}}, status_code=404)
        if body.get("tools") and not self.native_tools:
            return JSONResponse(
                {"error": {"message": '"auto" tool choice requires --enable-auto-tool-choice'}},
                status_code=400,
            )
        if messages[0]["content"] == "Say ok.":  # the client's probe for native tools
            return _answer("ok")
        turn = sum(1 for m in messages if m["role"] == "assistant")
        key = f"{_task_text(messages)[:200]}|{turn}"
        with self.lock:
            generation = self.generation
            self.requests.append(body)
            attempt = self.attempts[key]
            self.attempts[key] += 1
            task_key = _task_text(messages)[:200]
            if task_key not in self.tasks_asked:
                self.tasks_asked.append(task_key)
            held = self.hold_after is not None and (
                self.tasks_asked.index(task_key) >= self.hold_after
            )
        while held and self.hold_after is not None:
            await asyncio.sleep(0.05)
        if attempt < len(self.fail_first):
            status = self.fail_first[attempt]
            headers = {"Retry-After": "0"} if status == 429 else {}
            return JSONResponse({"error": {"message": "busy"}}, status_code=status, headers=headers)
        if attempt == 0 and self.delay_s:
            await asyncio.sleep(self.delay_s)
        if generation != self.generation:
            # Asked before the last use() (a request its client gave up on, a held one):
            # answering it now would play the new script and count an episode it never had.
            return JSONResponse({"error": {"message": "script changed"}}, status_code=503)
        text = body.get("tools") is None
        task = None if self.script in BLIND_SCRIPTS else self._task(messages)
        reply = getattr(self, f"_script_{self.script.replace('-', '_')}")(
            task, messages, turn, text
        )
        reply = _with_logprobs(reply) if body.get("logprobs") else reply
        return _as_stream(reply) if body.get("stream") else reply

    def _task(self, messages: list[dict[str, Any]]) -> Task:
        prompt = _task_text(messages)
        matches = [t for t in self.tasks if prompt.startswith(t.instruction.strip())]
        if not matches:
            raise LookupError(f"no task starts the prompt {prompt[:80]!r}")
        return max(matches, key=lambda t: len(t.instruction))

    # ── scripts: (task, messages, turn, text form?) -> a chat completion ───────
    def _script_oracle(self, task, messages, turn, text):
        plan = [(s.tool, s.arguments) for s in task.oracle_steps]
        plan.append(("final_answer", {"answer": task.oracle_answer}))
        return _call(*plan[min(turn, len(plan) - 1)], text=text)

    def _script_malformed(self, task, messages, turn, text):
        if turn == 0:
            return _raw_call("add_and_execute_code_cell", '{"code": "1 +', text=text)
        if turn == 1:
            return _raw_call("", "{}", text=text)
        return _call("final_answer", {"answer": task.oracle_answer}, text=text)

    def _script_unknown_tool(self, task, messages, turn, text):
        if turn == 0:
            return _call("drop_database", {"really": True}, text=text)
        return _call("final_answer", {"answer": task.oracle_answer}, text=text)

    def _script_name_argument(self, task, messages, turn, text):
        """An argument called ``name``, which a client passing ``**arguments`` would choke on."""
        if turn == 0:
            return _call("run_sql", {"query": "SELECT 1", "name": "x"}, text=text)
        return _call("final_answer", {"answer": task.oracle_answer}, text=text)

    def _script_chatty(self, task, messages, turn, text):
        return _answer(f"I believe the answer is {task.oracle_answer}.")

    def _script_rambler(self, task, messages, turn, text):
        return _answer(
            "all work and no play " * 20_000, finish_reason="length", completion_tokens=4096
        )

    def _script_lister(self, task, messages, turn, text):
        return _call("list_files", {}, text=text, completion_tokens=1000)

    def _script_alternate(self, task, messages, turn, text):
        """Right in every second episode of a task, wrong in the others."""
        with self.lock:
            episode = self.attempts[f"{task.id}#episodes"]
            self.attempts[f"{task.id}#episodes"] += 1
        answer = task.oracle_answer if episode % 2 else "-1"
        return _call("final_answer", {"answer": answer}, text=text)

    def _script_oracle_then_stop(self, task, messages, turn, text):
        """The oracle, then (its episode over) a last message with no tool call."""
        if turn > len(task.oracle_steps):
            return _answer("Done.")
        return self._script_oracle(task, messages, turn, text)

    def _script_look_then_answer(self, task, messages, turn, text):
        """List the files, call final_answer with the right answer, then stop."""
        plan = [_call("list_files", {}, text=text)]
        plan.append(_call("final_answer", {"answer": task.oracle_answer}, text=text))
        return plan[turn] if turn < len(plan) else _answer("Done.")

    def _script_answer_in_text(self, task, messages, turn, text):
        """The oracle's tool steps, then the answer as a plain message (no final_answer call)."""
        if turn < len(task.oracle_steps):
            step = task.oracle_steps[turn]
            return _call(step.tool, step.arguments, text=text)
        return _answer(task.oracle_answer)

    def _script_wrong(self, task, messages, turn, text):
        return _call("final_answer", {"answer": "-1"}, text=text)

    def _script_json_first_right(self, task, messages, turn, text):
        """OpenEnv JSON actions as plain text (verifiers' ``OpenEnvEnv`` parses those): for
        the first task the stand-in was given, list the files, then the oracle's plan; for
        the others, a wrong answer at once."""
        plan = [("list_files", {})] + [(s.tool, s.arguments) for s in task.oracle_steps]
        plan.append(("final_answer", {"answer": task.oracle_answer}))
        if task is not self.tasks[0]:
            plan = [("final_answer", {"answer": "-1"})]
        name, arguments = plan[min(turn, len(plan) - 1)]
        return _answer(json.dumps({"type": "call_tool", "tool_name": name, "arguments": arguments}))


def _task_text(messages: list[dict[str, Any]]) -> str:
    """The first user turn: a prompt, or the instruction in an OpenEnv observation payload."""
    text = next((m["content"] for m in messages if m["role"] == "user"), "")
    if isinstance(text, list):  # content parts, as HUD's agents send them
        text = "".join(p.get("text", "") for p in text if isinstance(p, dict))
    try:
        payload = json.loads(text)
    except ValueError:
        return text.strip()
    observation = payload.get("observation") if isinstance(payload, dict) else None
    return str((observation or {}).get("instruction") or text).strip()


def _answer(
    content: str,
    *,
    finish_reason: str = "stop",
    completion_tokens: int = 7,
    tool_calls: list[dict[str, Any]] | None = None,
) -> JSONResponse:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return JSONResponse(
        {
            "id": "chatcmpl-standin",
            "object": "chat.completion",
            "model": "standin",
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": {
                "prompt_tokens": 100,
                "completion_tokens": completion_tokens,
                "total_tokens": 100 + completion_tokens,
            },
        }
    )


def _with_logprobs(reply: JSONResponse) -> JSONResponse:
    """``reply`` with token logprobs on each choice, as vLLM adds them when a request asks.

    The "tokens" are the words of what the model wrote (its text, else its tool
    calls' arguments); the values are made up but well-formed.
    """
    body = json.loads(reply.body)
    for choice in body["choices"]:
        message = choice["message"]
        written = message.get("content") or " ".join(
            c["function"]["arguments"] for c in message.get("tool_calls") or []
        )
        tokens = written.split(" ") or [""]
        choice["logprobs"] = {
            "content": [
                {"token": t, "logprob": -0.25, "bytes": list(t.encode()), "top_logprobs": []}
                for t in tokens
            ],
            "refusal": None,
        }
    return JSONResponse(body, status_code=reply.status_code)


def _as_stream(reply: JSONResponse) -> Response:
    """``reply`` as a server-sent event stream, for a request with ``"stream": true``: one
    chunk whose delta is the whole message (tool calls indexed), then ``[DONE]``."""
    body = json.loads(reply.body)
    choices = []
    for choice in body["choices"]:
        delta = dict(choice["message"])
        if delta.get("tool_calls"):
            delta["tool_calls"] = [{**c, "index": i} for i, c in enumerate(delta["tool_calls"])]
        choices.append({"index": choice["index"], "delta": delta, **_finish(choice)})
    chunk = {**body, "object": "chat.completion.chunk", "choices": choices}
    events = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n"
    return Response(events, media_type="text/event-stream")


def _finish(choice: dict[str, Any]) -> dict[str, Any]:
    return {k: choice[k] for k in ("finish_reason", "logprobs") if k in choice}


def _raw_call(name: str, arguments: str, *, text: bool, completion_tokens: int = 20):
    if text:  # the text form of a broken call: a block that is not JSON
        return _answer(
            f'<tool_call>{{"name": "{name}", "arguments": {arguments}</tool_call>',
            completion_tokens=completion_tokens,
        )
    call = {"id": "call_0", "type": "function", "function": {"name": name, "arguments": arguments}}
    return _answer(
        "", finish_reason="tool_calls", tool_calls=[call], completion_tokens=completion_tokens
    )


def _call(name: str, arguments: dict[str, Any], *, text: bool, completion_tokens: int = 20):
    if text:
        block = json.dumps({"name": name, "arguments": arguments})
        content = f"Let me do that.\n<tool_call>\n{block}\n</tool_call>"
        assert parse_tool_calls(content)  # the stand-in writes what the parser reads
        return _answer(content, completion_tokens=completion_tokens)
    return _raw_call(name, json.dumps(arguments), text=False, completion_tokens=completion_tokens)
