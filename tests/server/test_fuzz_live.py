"""Protocol fuzzing against a live server: every frame gets a reply, and the session lives on.

Hypothesis generates ``/ws`` frames (any JSON value, frames shaped like OpenEnv's
messages with arbitrary ``data``, raw text, binary), ``/mcp`` WebSocket requests and
``POST /mcp`` bodies. For each: exactly one reply that is a JSON object of the
protocol's shape (``observation``/``state``/``error``/``mcp`` on ``/ws``, a JSON-RPC
response on ``/mcp``), then a ``state`` frame on the same socket still answers, and at
the end a second session runs a cell. The only frame with a documented close,
``{"type": "close"}`` exactly, is left out. Tools that run code or shell commands are
left out too: the fuzzer tests the protocol, not what random code does in a kernel.
"""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.sync.client import connect

from analyst_env.server.local_server import BackgroundServer

pytestmark = pytest.mark.live

FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True
)

scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)
safe_tools = st.sampled_from(
    ["list_files", "get_notebook_state", "run_sql", "final_answer", "nope", ""]
) | st.text(max_size=20)
actions = st.fixed_dictionaries(
    {"type": st.sampled_from(["call_tool", "list_tools", "bogus"]) | json_values},
    optional={
        "tool_name": safe_tools | json_values,
        "arguments": st.dictionaries(st.text(max_size=10), json_values, max_size=3) | json_values,
        "metadata": json_values,
    },
)
reset_data = st.fixed_dictionaries(
    {},
    optional={
        "task_id": st.sampled_from(["tiny-csv", "tiny-sqlite", "nope"]) | json_values,
        "seed": json_values,
        "split": st.sampled_from(["train", "test", "x"]) | json_values,
        "index": json_values,
        "episode_id": json_values,
        "options": json_values,
        "environment": json_values,
        "junk": json_values,
    },
)
rpc = st.fixed_dictionaries(
    {
        "jsonrpc": st.sampled_from(["2.0", "1.0"]) | json_values,
        "method": st.sampled_from(["tools/list", "tools/call", "openenv/session/close", "nope"])
        | json_values,
    },
    optional={
        "id": st.integers() | st.text(max_size=8) | st.none() | json_values,
        "params": st.fixed_dictionaries(
            {},
            optional={
                "name": safe_tools,
                "arguments": json_values,
                "session_id": st.text(max_size=8),
            },
        )
        | json_values,
    },
)
ws_frames = st.one_of(
    json_values.map(json.dumps),
    st.builds(lambda d: json.dumps({"type": "reset", "data": d}), reset_data | json_values),
    st.builds(lambda d: json.dumps({"type": "step", "data": d}), actions | json_values),
    st.builds(
        lambda d: json.dumps({"type": "state", **d}),
        st.dictionaries(st.text(max_size=6), json_values, max_size=2),
    ),
    st.builds(lambda d: json.dumps({"type": "mcp", "data": d}), rpc | json_values),
    st.builds(lambda t, d: json.dumps({"type": t, "data": d}), st.text(max_size=10), json_values),
    st.text(max_size=200),
    st.binary(max_size=200),
).filter(lambda f: f != '{"type": "close"}')


@pytest.fixture(scope="module")
def url(app):
    with BackgroundServer(app) as base:
        yield base


def ws(base: str, path: str = "/ws"):
    return connect(base.replace("http://", "ws://") + path, max_size=None, open_timeout=30)


def test_every_ws_frame_gets_one_reply_and_the_session_lives_on(url):
    with ws(url) as sock:

        @FUZZ
        @given(ws_frames)
        def check(frame):
            sock.send(frame)
            reply = json.loads(sock.recv(timeout=60))
            assert isinstance(reply, dict) and reply.get("type") in {
                "observation",
                "state",
                "error",
                "mcp",
            }, reply
            if reply["type"] == "error":
                assert reply["data"]["code"] in {
                    "INVALID_JSON",
                    "UNKNOWN_TYPE",
                    "VALIDATION_ERROR",
                    "EXECUTION_ERROR",
                }
            sock.send(json.dumps({"type": "state"}))
            assert json.loads(sock.recv(timeout=60))["type"] == "state"

        check()
    bystander_works(url)


def test_every_mcp_websocket_request_gets_one_json_rpc_reply(url):
    with ws(url, "/mcp") as sock:

        @FUZZ
        @given(
            st.one_of(
                rpc.map(json.dumps),
                json_values.map(json.dumps),
                st.text(max_size=100),
                st.binary(max_size=100),
            )
        )
        def check(frame):
            sock.send(frame)
            reply = json.loads(sock.recv(timeout=60))
            assert reply.get("jsonrpc") == "2.0" and ("result" in reply) != ("error" in reply), (
                reply
            )
            sock.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
            assert "result" in json.loads(sock.recv(timeout=60))

        check()
    bystander_works(url)


def test_every_http_mcp_body_gets_a_json_rpc_reply(url):
    with httpx.Client(base_url=url, timeout=60) as client:

        @FUZZ
        @given(st.one_of(rpc.map(json.dumps), json_values.map(json.dumps), st.text(max_size=100)))
        def check(body):
            response = client.post(
                "/mcp", content=body, headers={"content-type": "application/json"}
            )
            assert response.status_code == 200, response.text
            assert response.json()["jsonrpc"] == "2.0"

        check()
    bystander_works(url)


def test_tool_arguments_that_are_not_an_object_are_invalid_params(url):
    """Not an internal error naming the server's own functions: the caller's mistake, said so."""
    with httpx.Client(base_url=url, timeout=60) as client, ws(url, "/mcp") as sock:
        for arguments in ("x", [1, 2], None, 5):
            request = {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "tools/call",
                "params": {"name": "list_files", "arguments": arguments},
            }
            sock.send(json.dumps(request))
            for reply in (client.post("/mcp", json=request).json(), json.loads(sock.recv(60))):
                assert reply["id"] == 7 and reply["error"]["code"] == -32602, reply
                assert reply["error"]["message"] == "'arguments' must be an object"
    bystander_works(url)


def bystander_works(url: str) -> None:
    with ws(url) as sock:
        sock.send(json.dumps({"type": "reset", "data": {"task_id": "tiny-csv"}}))
        assert json.loads(sock.recv(timeout=60))["type"] == "observation"
        sock.send(
            json.dumps(
                {
                    "type": "step",
                    "data": {
                        "type": "call_tool",
                        "tool_name": "add_and_execute_code_cell",
                        "arguments": {"code": "print(6 * 7)"},
                    },
                }
            )
        )
        assert json.loads(sock.recv(timeout=60))["data"]["observation"]["result"]["data"] == "42"
