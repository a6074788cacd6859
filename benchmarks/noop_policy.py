"""A no-op policy behind an OpenAI-compatible endpoint, for measuring trainer adapters.

Adapters whose trainer asks a model endpoint for each turn (ART, HUD) need one to
play an episode at all. This one answers every request at once with a single
``final_answer`` call, so an episode is reset + one answer and what a run measures
is the adapter's own cost (its prompt rendering, tool-call parsing, session
handling), not a model's. It answers in the form the request asks for: a native
``tool_calls`` message when the request offers tools, else the Hermes
``<tool_call>`` text block every text adapter parses; token logprobs when asked
(ART asks, as a trainer's vLLM is asked); a one-chunk event stream when asked.
"""

from __future__ import annotations

import json
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from analyst_env.server.local_server import BackgroundServer

ANSWER = {"answer": "0"}
"""What the no-op policy answers: a number, so every scorer reads it (and marks it wrong)."""


def completion(body: dict[str, Any]) -> dict[str, Any]:
    """The chat completion answering ``body``: one ``final_answer`` call."""
    arguments = json.dumps(ANSWER)
    if body.get("tools"):
        call = {
            "id": "call_0",
            "type": "function",
            "function": {"name": "final_answer", "arguments": arguments},
        }
        message: dict[str, Any] = {"role": "assistant", "content": "", "tool_calls": [call]}
        finish, written = "tool_calls", arguments
    else:
        block = json.dumps({"name": "final_answer", "arguments": ANSWER})
        message = {"role": "assistant", "content": f"<tool_call>\n{block}\n</tool_call>"}
        finish, written = "stop", message["content"]
    choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish}
    if body.get("logprobs"):
        tokens = written.split(" ")
        choice["logprobs"] = {
            "content": [
                {"token": t, "logprob": -0.1, "bytes": list(t.encode()), "top_logprobs": []}
                for t in tokens
            ],
            "refusal": None,
        }
    return {
        "id": "chatcmpl-noop",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "noop"),
        "choices": [choice],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def _stream(reply: dict[str, Any]) -> Response:
    """``reply`` as one server-sent chunk whose delta is the whole message, then ``[DONE]``."""
    choices = []
    for choice in reply["choices"]:
        delta = dict(choice["message"])
        if delta.get("tool_calls"):
            delta["tool_calls"] = [{**c, "index": i} for i, c in enumerate(delta["tool_calls"])]
        extra = {k: choice[k] for k in ("finish_reason", "logprobs") if k in choice}
        choices.append({"index": choice["index"], "delta": delta, **extra})
    chunk = {**reply, "object": "chat.completion.chunk", "choices": choices}
    return Response(
        f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n", media_type="text/event-stream"
    )


def app() -> FastAPI:
    """The endpoint: ``POST /v1/chat/completions`` and ``GET /v1/models``."""
    api = FastAPI()

    @api.post("/v1/chat/completions")
    async def complete(request: Request) -> Response:
        body = await request.json()
        reply = completion(body)
        return _stream(reply) if body.get("stream") else JSONResponse(reply)

    @api.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": "noop", "object": "model", "owned_by": "bench"}]}

    return api


class NoopPolicy:
    """``with NoopPolicy() as url:`` serves the policy on a loopback port; ``url`` ends in
    ``/v1``."""

    def __init__(self) -> None:
        self._server = BackgroundServer(app())

    def __enter__(self) -> str:
        return self._server.__enter__() + "/v1"

    def __exit__(self, *exc: Any) -> None:
        self._server.__exit__(*exc)
