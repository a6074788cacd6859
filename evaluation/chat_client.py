"""A client for any OpenAI-compatible chat endpoint (vLLM, SGLang, TGI, llama.cpp, OpenAI).

``analyst-env eval`` talks to models only through :class:`ChatClient`: one
``POST {base_url}/chat/completions`` per turn over httpx. Busy or failing
endpoints are normal during an evaluation, so 429 and 5xx answers, dropped
connections and timeouts are retried with exponential backoff (honouring
``Retry-After``); other 4xx answers are the request's fault and fail at once.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from typing import Any

import httpx

RETRIED_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
MAX_BACKOFF_S = 30.0


class ChatError(RuntimeError):
    """The endpoint refused the request, or kept failing after every retry.

    Attributes:
        status: The HTTP status of the last answer (None: no answer, e.g. a timeout).
        transient: Whether the cause was the endpoint being busy or down (worth
            re-running later), not the request itself.
    """

    def __init__(
        self,
        message: str,
        status: int | None = None,
        transient: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.transient = transient
        self.retry_after = retry_after


@dataclass
class ChatReply:
    """One assistant turn: its text, its native tool calls and what it cost."""

    content: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts: int = 1
    error: str | None = None
    """Set by a scripted policy that cannot go on (one of its steps failed): ends the episode."""

    def message(self) -> dict[str, Any]:
        """The turn as an assistant message to send back in the conversation."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = self.tool_calls
        return msg


@dataclass
class ChatClient:
    """Sends chat-completions requests to one model.

    Args:
        base_url: The endpoint's base, e.g. ``http://127.0.0.1:8000/v1``
            (``/chat/completions`` is appended).
        model: The ``model`` field of every request.
        api_key: Sent as ``Authorization: Bearer``; None sends none.
        timeout_s: Limit for one request, connection to last byte.
        retries: Further attempts after a 429/5xx, a dropped connection or a timeout.
        backoff_s: Wait before the first retry; doubled each time, capped at 30 s,
            with jitter. A ``Retry-After`` header wins when it asks for longer.
        sampling: Extra request fields (``temperature``, ``top_p``, ``max_tokens``, ``seed``).
    """

    base_url: str
    model: str
    api_key: str | None = None
    timeout_s: float = 300.0
    retries: int = 4
    backoff_s: float = 1.0
    sampling: dict[str, Any] = field(default_factory=dict)
    _http: httpx.AsyncClient | None = field(default=None, init=False, repr=False)

    async def __aenter__(self) -> ChatClient:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        self._http = httpx.AsyncClient(
            base_url=self.base_url.rstrip("/"), headers=headers, timeout=self.timeout_s
        )
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> ChatReply:
        """One assistant turn for ``messages``, offering ``tools`` natively when given.

        Raises:
            ChatError: A 4xx other than 429 (at once), or the last failure after every retry.
        """
        body: dict[str, Any] = {"model": self.model, "messages": messages, **self.sampling}
        if tools:
            body["tools"] = tools
        data, attempts = await self._post(body)
        return _parse_reply(data, attempts)

    async def supports_native_tools(self) -> bool:
        """Whether the endpoint accepts a ``tools`` list (one short request, two if not).

        A 400/404/422 answer to a request with ``tools`` means it does not (vLLM
        without a tool parser, llama.cpp without ``--jinja``) only if the same
        request without ``tools`` is accepted; otherwise the endpoint refuses the
        model or the settings, and that error is raised.

        Raises:
            ChatError: The endpoint is unreachable, failing, or refuses the request itself.
        """
        probe = {
            "type": "function",
            "function": {
                "name": "noop",
                "description": "Does nothing.",
                "parameters": {"type": "object", "properties": {}},
            },
        }
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": "Say ok."}],
            **self.sampling,
        }
        try:
            await self._post({**body, "tools": [probe]})
        except ChatError as exc:
            if exc.status in (400, 404, 422):
                await self._post(body)  # raises when the request fails without tools too
                return False
            raise
        return True

    async def _post(self, body: dict[str, Any]) -> tuple[dict[str, Any], int]:
        if self._http is None:
            raise RuntimeError("use ChatClient inside 'async with'")
        last: ChatError | None = None
        for attempt in range(self.retries + 1):
            if attempt:
                await asyncio.sleep(self._delay(attempt, last))
            try:
                answer = await self._http.post("/chat/completions", json=body)
            except httpx.TimeoutException:
                last = ChatError(f"no answer within {self.timeout_s:g} s", transient=True)
                continue
            except httpx.TransportError as exc:
                last = ChatError(f"connection failed: {type(exc).__name__}: {exc}", transient=True)
                continue
            if answer.status_code in RETRIED_STATUS:
                last = ChatError(
                    f"HTTP {answer.status_code}: {_detail(answer)}",
                    answer.status_code,
                    transient=True,
                    retry_after=_retry_after(answer),
                )
                continue
            if answer.status_code >= 400:
                raise ChatError(f"HTTP {answer.status_code}: {_detail(answer)}", answer.status_code)
            try:
                data = answer.json()
            except ValueError:
                raise ChatError("the endpoint answered with something that is not JSON") from None
            if not isinstance(data, dict):
                raise ChatError("the endpoint answered with JSON that is not an object")
            return data, attempt + 1
        assert last is not None
        raise ChatError(f"{last} (after {self.retries + 1} attempts)", last.status, transient=True)

    def _delay(self, attempt: int, last: ChatError | None) -> float:
        wait = min(MAX_BACKOFF_S, self.backoff_s * 2 ** (attempt - 1))
        wait *= 0.5 + random.random() / 2
        asked = last.retry_after if last is not None else None
        return max(wait, min(asked, MAX_BACKOFF_S)) if asked is not None else wait


def _retry_after(answer: httpx.Response) -> float | None:
    try:
        return max(0.0, float(answer.headers.get("retry-after", "")))
    except ValueError:
        return None


def _detail(answer: httpx.Response) -> str:
    text = answer.text.strip()
    return text[:300] + ("…" if len(text) > 300 else "") if text else answer.reason_phrase


def _of_type(value: Any, kind: type, default: Any) -> Any:
    """``value`` if it is a ``kind``, else ``default``: endpoints send nulls and odd shapes."""
    return value if isinstance(value, kind) else default


def _parse_reply(data: dict[str, Any], attempts: int) -> ChatReply:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ChatError(f"the answer has no choices: {str(data)[:200]}")
    choice = choices[0]
    message = _of_type(choice.get("message"), dict, {})
    usage = _of_type(data.get("usage"), dict, {})
    calls = _of_type(message.get("tool_calls"), list, [])
    return ChatReply(
        content=_of_type(message.get("content"), str, ""),
        tool_calls=[c for c in calls if isinstance(c, dict)],
        finish_reason=choice.get("finish_reason"),
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        attempts=attempts,
    )
