"""Live tests: no frame a client sends ends its session (issue 14, items 1-3).

Every malformed frame (binary, JSON that is not an object, nesting deeper than any
parser should follow, integers too long to convert, unknown types, huge frames) gets
an error frame with OpenEnv's error code, and the episode that received it goes on:
a variable set before the bad frame is still there after it, and a second session
keeps working. HTTP ``/reset`` errors are 4xx with the message ``/ws`` gives. A
socket that stays open outlives the idle timeout, and ``--max-sessions`` still counts it.
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
import websockets
from support import code_step

from analyst_env.server.app import build_app
from analyst_env.server.environment import AnalystEnvironment, SessionClosed
from analyst_env.server.local_server import BackgroundServer

pytestmark = pytest.mark.live

DEEP = 100_000


@pytest.fixture(scope="module")
def url(app):
    with BackgroundServer(app) as base_url:
        yield base_url


def ws_url(base: str, path: str = "/ws") -> str:
    return base.replace("http://", "ws://") + path


async def frame(ws, message) -> dict:
    await ws.send(message if isinstance(message, (str, bytes)) else json.dumps(message))
    return json.loads(await asyncio.wait_for(ws.recv(), timeout=30))


def text_of(reply: dict) -> str:
    return reply["data"]["observation"]["result"]["data"]


def deep_arguments() -> str:
    return (
        '{"type":"step","data":{"type":"call_tool","tool_name":"run_sql","arguments":{"query":'
        + "[" * DEEP
        + "]" * DEEP
        + "}}}"
    )


BAD_FRAMES = {
    "binary": (b"\x00\x01 not text", "INVALID_JSON"),
    "binary-json": (json.dumps({"type": "state"}).encode(), "INVALID_JSON"),
    "json-array": ("[1, 2, 3]", "VALIDATION_ERROR"),
    "json-number": ("42", "VALIDATION_ERROR"),
    "json-string": ('"reset"', "VALIDATION_ERROR"),
    "json-null": ("null", "VALIDATION_ERROR"),
    "depth-100k": ("[" * DEEP + "]" * DEEP, "INVALID_JSON"),
    "depth-100k-in-arguments": (deep_arguments(), "INVALID_JSON"),
    "depth-100-objects": (
        '{"type":"state","x":' + '{"a":' * 100 + "1" + "}" * 100 + "}",
        "INVALID_JSON",
    ),
    "seed-10^5000": (
        '{"type":"reset","data":{"task_id":"tiny-csv","seed":1' + "0" * 5000 + "}}",
        "INVALID_JSON",
    ),
    "unknown-type": ({"type": "explode"}, "UNKNOWN_TYPE"),
    "type-not-a-string": ({"type": ["reset"]}, "UNKNOWN_TYPE"),
    "huge-type": ({"type": "x" * 5_000_000}, "UNKNOWN_TYPE"),
    "step-data-array": ({"type": "step", "data": [1]}, "VALIDATION_ERROR"),
    "reset-data-string": ({"type": "reset", "data": "tiny-csv"}, "VALIDATION_ERROR"),
    "mcp-data-null": ({"type": "mcp", "data": None}, "VALIDATION_ERROR"),
    "arguments-not-an-object": (
        {"type": "step", "data": {"type": "call_tool", "tool_name": "run_sql", "arguments": [1]}},
        "VALIDATION_ERROR",
    ),
    "huge-junk": ("x" * 20_000_000, "INVALID_JSON"),
    "action-type-an-object": (
        {"type": "step", "data": {"type": {}, "tool_name": "run_sql", "arguments": {}}},
        "VALIDATION_ERROR",
    ),
}


@pytest.mark.parametrize("name", list(BAD_FRAMES))
def test_a_malformed_frame_gets_an_error_frame_and_the_episode_goes_on(url, name):
    message, expected_code = BAD_FRAMES[name]

    async def main():
        async with (
            websockets.connect(ws_url(url), max_size=None) as bystander,
            websockets.connect(ws_url(url), max_size=None) as sender,
        ):
            await frame(bystander, {"type": "reset", "data": {"task_id": "tiny-csv"}})
            await frame(bystander, code_step("mine = 'intact'"))
            reset = await frame(sender, {"type": "reset", "data": {"task_id": "tiny-csv"}})
            episode_id = reset["data"]["observation"]["episode_id"]
            await frame(sender, code_step("kept = 'still here'"))
            reply = await frame(sender, message)
            assert reply["type"] == "error" and reply["data"]["code"] == expected_code, reply
            assert len(json.dumps(reply)) < 10_000, "an error frame must not echo a huge input"
            after = await frame(sender, code_step("print(kept)"))
            assert text_of(after) == "still here", "the bad frame ended the episode"
            state = await frame(sender, {"type": "state"})
            assert state["data"]["episode_id"] == episode_id and state["data"]["step_count"] == 2
            assert text_of(await frame(bystander, code_step("print(mine)"))) == "intact"

    asyncio.run(main())


def test_valid_frames_are_answered_as_openenv_answers_them(url):
    async def main():
        async with websockets.connect(ws_url(url)) as ws:
            bad_json = await frame(ws, "not json")
            assert bad_json == {
                "type": "error",
                "data": {
                    "message": "Invalid JSON: Expecting value: line 1 column 1 (char 0)",
                    "code": "INVALID_JSON",
                },
            }
            assert await frame(ws, {"type": "bogus"}) == {
                "type": "error",
                "data": {"message": "Unknown message type: bogus", "code": "UNKNOWN_TYPE"},
            }
            invalid = await frame(ws, {"type": "step", "data": {"foo": 1}})
            assert (
                invalid["data"]["code"] == "VALIDATION_ERROR"
                and invalid["data"]["message"] == "Invalid message"
            )
            assert {e["type"] for e in invalid["data"]["errors"]} == {"missing", "extra_forbidden"}
            rpc = await frame(
                ws, {"type": "mcp", "data": {"jsonrpc": "2.0", "method": "nope", "id": 3}}
            )
            assert (
                rpc
                == {
                    "type": "mcp",
                    "data": {
                        "jsonrpc": "2.0",
                        "error": {
                            "code": -32601,
                            "message": "Method not found: nope",
                            "data": None,
                        },
                        "id": 3,
                    },
                }
                or rpc["data"]["error"]["code"] == -32601
            )
            await ws.send(json.dumps({"type": "close"}))
            with pytest.raises(websockets.ConnectionClosedOK):
                await asyncio.wait_for(ws.recv(), timeout=10)
            assert ws.close_code == 1000

    asyncio.run(main())


MCP_BAD = {
    "binary": (b"\xff\xfe", -32700),
    "not-json": ("{oops", -32700),
    "depth-100k": ("[" * DEEP + "]" * DEEP, -32700),
    "depth-100k-in-arguments": (
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_sql","arguments":'
        + "[" * DEEP
        + "]" * DEEP
        + "}}",
        -32700,
    ),
    "big-int-id": ('{"jsonrpc":"2.0","method":"tools/list","id":1' + "0" * 5000 + "}", -32700),
    "array": ("[]", -32600),
    "null": ("null", -32600),
    "wrong-version": ({"jsonrpc": "1.0", "method": "tools/list", "id": 1}, -32600),
    "arguments-not-an-object": (
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "run_sql", "arguments": [1]},
        },
        None,
    ),
}


@pytest.mark.parametrize("name", list(MCP_BAD))
def test_mcp_websocket_answers_every_bad_request_and_goes_on(url, name):
    message, expected = MCP_BAD[name]

    async def main():
        async with (
            websockets.connect(ws_url(url, "/mcp"), max_size=None) as ws,
            websockets.connect(ws_url(url), max_size=None) as bystander,
        ):
            await frame(bystander, {"type": "reset", "data": {"task_id": "tiny-csv"}})
            reply = await frame(ws, message)
            assert reply["jsonrpc"] == "2.0" and "error" in reply, reply
            if expected is not None:
                assert reply["error"]["code"] == expected, reply
            listed = await frame(ws, {"jsonrpc": "2.0", "id": 7, "method": "tools/list"})
            assert listed["id"] == 7 and any(
                t["name"] == "run_sql" for t in listed["result"]["tools"]
            )
            assert text_of(await frame(bystander, code_step("print(6 * 7)"))) == "42"

    asyncio.run(main())


RESET_ERRORS = [
    ({"task": "tiny-csv"}, 422, "unknown option 'task'"),
    ({"task_id": "no-such-task"}, 404, "unknown task_id 'no-such-task'"),
    ({"split": "train", "index": -1}, 422, "'index'"),
    ({"split": "train", "index": 99}, 404, "out of range"),
    ({"split": "nope"}, 404, "unknown split 'nope'"),
    ({"task_id": "tiny-csv", "index": 0}, 422, "either task_id or split/index"),
    ({"seed": False}, 422, "'seed': must be an integer, not true or false"),
    ({"split": "train", "index": True}, 422, "'index': must be an integer, not true or false"),
    ({"seed": 1, "options": {"seed": 2}}, 422, "'seed' is given twice with different values"),
    ({"episode_id": "a", "options": {"episode_id": "b"}}, 422, "'episode_id' is given twice"),
    ({"task_id": "tiny-csv", "options": {"task_id": "x"}}, 422, "'task_id' is given twice"),
    ({"options": []}, 422, "'options' must be an object"),
]


@pytest.mark.parametrize("body, status, fragment", RESET_ERRORS)
def test_http_reset_errors_are_4xx_with_the_ws_message(url, body, status, fragment):
    response = httpx.post(f"{url}/reset", json=body, timeout=30)
    assert response.status_code == status, response.text
    detail = response.json()["detail"]
    assert fragment in detail

    async def over_ws():
        async with websockets.connect(ws_url(url)) as ws:
            return await frame(ws, {"type": "reset", "data": body})

    reply = asyncio.run(over_ws())
    assert reply["data"]["code"] == "EXECUTION_ERROR" and reply["data"]["message"] == detail
    ok = httpx.post(f"{url}/reset", json={"task_id": "tiny-csv"}, timeout=30)
    assert ok.status_code == 200 and ok.json()["observation"]["task_id"] == "tiny-csv"


@pytest.mark.parametrize("kind", [{}, ["call_tool"], 7])
def test_http_step_refuses_an_action_type_that_is_no_string_with_422(url, kind):
    action = {"type": kind, "tool_name": "run_sql", "arguments": {"query": "SELECT 1"}}
    response = httpx.post(f"{url}/step", json={"action": action}, timeout=30)
    assert response.status_code == 422, response.text
    assert "'type' must be a string" in response.json()["detail"]


def test_http_reset_takes_a_session_slot_and_is_refused_when_every_slot_is_taken(settings, runtime):
    app = build_app(settings.model_copy(update={"max_sessions": 1}), runtime=runtime)
    sessions = app.state.sessions
    start = runtime.backend.start

    def slow_start(*args, **kwargs):  # a reset long enough to be seen holding its slot
        time.sleep(1.0)
        return start(*args, **kwargs)

    async def main(base):
        async with websockets.connect(ws_url(base)) as held:
            await frame(held, {"type": "reset", "data": {"task_id": "tiny-csv"}})
            async with httpx.AsyncClient() as http:
                full = await http.post(f"{base}/reset", json={"task_id": "tiny-csv"}, timeout=30)
            assert full.status_code == 503, full.text
            assert "at capacity: 1 of 1 sessions" in full.json()["detail"]
            assert len(sessions) == 1, "a refused reset started nothing"
        for _ in range(100):
            if not sessions:
                break
            await asyncio.sleep(0.05)
        async with httpx.AsyncClient() as http:
            running = asyncio.ensure_future(
                http.post(f"{base}/reset", json={"task_id": "tiny-csv"}, timeout=30)
            )
            while not sessions and not running.done():
                await asyncio.sleep(0.01)
            assert len(sessions) == 1, "a running HTTP reset holds a slot"
            async with websockets.connect(ws_url(base)) as other:
                refused = json.loads(await asyncio.wait_for(other.recv(), timeout=30))
            assert refused["data"]["code"] == "CAPACITY_REACHED", refused
            assert (await running).status_code == 200
        assert not sessions, "the HTTP reset's slot is given back"

    runtime.backend.start = slow_start
    runtime.backend.start_nowait = lambda *args, **kwargs: None  # every start the slow way
    try:
        with BackgroundServer(app) as base:
            asyncio.run(main(base))
    finally:
        del runtime.backend.start
        del runtime.backend.start_nowait


def test_an_open_socket_is_never_reaped_and_capacity_stays_exact(settings, runtime):
    app = build_app(
        settings.model_copy(update={"session_idle_timeout_s": 1.0, "max_sessions": 2}),
        runtime=runtime,
    )

    async def main(base):
        async with websockets.connect(ws_url(base)) as a, websockets.connect(ws_url(base)) as b:
            first = await frame(a, {"type": "reset", "data": {"task_id": "tiny-csv"}})
            await frame(a, code_step("thought = 'long'"))
            await frame(b, {"type": "reset", "data": {"task_id": "tiny-csv"}})
            await asyncio.sleep(
                6.5
            )  # "generating" past the idle timeout; the reaper wakes every 5 s
            after = await frame(a, code_step("print(thought)"))
            assert text_of(after) == "long", "the idle reaper killed a session whose socket is open"
            state = await frame(a, {"type": "state"})
            assert state["data"]["episode_id"] == first["data"]["observation"]["episode_id"]
            async with websockets.connect(ws_url(base)) as c:
                refused = json.loads(await asyncio.wait_for(c.recv(), timeout=10))
            assert (
                refused["data"]["code"] == "CAPACITY_REACHED"
                and refused["data"]["active_sessions"] == 2
            )
        await asyncio.sleep(0.3)
        async with websockets.connect(ws_url(base)) as d:
            assert (await frame(d, {"type": "reset", "data": {"task_id": "tiny-csv"}}))[
                "type"
            ] == "observation"

    with BackgroundServer(app) as base:
        asyncio.run(main(base))
        sessions = app.state.sessions
        deadline = time.monotonic() + 5
        while sessions and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not sessions, "closed sockets left sessions behind"


def test_reset_on_a_closed_environment_starts_nothing(runtime):
    env = AnalystEnvironment(runtime)
    env.close()
    started = []
    original, original_nowait = runtime.backend.start, runtime.backend.start_nowait
    runtime.backend.start = lambda *a, **k: started.append(1) or original(*a, **k)
    runtime.backend.start_nowait = lambda *a, **k: started.append(1) or original_nowait(*a, **k)
    try:
        with pytest.raises(SessionClosed):
            env.reset(task_id="tiny-csv")
        with pytest.raises(SessionClosed):
            asyncio.run(env.reset_async(task_id="tiny-csv"))
    finally:
        del runtime.backend.start
        del runtime.backend.start_nowait
    assert not started and env.state.episode_id is None
