"""ASGI-level tests: OpenEnv's routes and frames through FastAPI's TestClient.

Covers the wire format (frames, envelopes, schemas), malformed input on /ws and
/mcp, the Task API and the bearer token, with the real app and real sandboxes.
"""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from analyst_env.server.app import build_app


@pytest.fixture(scope="module")
def client(app):
    with TestClient(app) as c:
        yield c


def frame(ws, message) -> dict:
    ws.send_text(message if isinstance(message, str) else json.dumps(message))
    return ws.receive_json()


def test_info_routes(client):
    health = client.get("/health").json()
    assert health["status"] == "healthy"  # what OpenEnv's clients and `openenv validate` read
    assert health["sandbox"]["backend"] == "local" and health["sandbox"]["isolation"] in {
        "full",
        "userns",
        "landlock",
        "none",
    }
    meta = client.get("/metadata").json()
    assert meta["name"] == "analyst_env" and isinstance(meta["description"], str)
    schema = client.get("/schema").json()
    assert {"action", "observation", "state", "reset_observation"} <= set(schema)
    assert "instruction" in schema["reset_observation"]["properties"]
    assert "cells" in schema["state"]["properties"]
    assert client.get("/openapi.json").json()["info"]["version"].startswith("1.")


def test_ws_episode_frames(client):
    with client.websocket_connect("/ws") as ws:
        reply = frame(
            ws, {"type": "reset", "data": {"task_id": "tiny-csv", "seed": 3, "episode_id": "ws-1"}}
        )
        assert reply["type"] == "observation"
        data = reply["data"]
        assert data["done"] is False and data["reward"] is None
        assert data["observation"]["instruction"].startswith("What is the total")
        assert data["metadata"]["status"] == "ready"
        reply = frame(
            ws,
            {
                "type": "step",
                "data": {
                    "type": "call_tool",
                    "tool_name": "add_and_execute_code_cell",
                    "arguments": {"code": "6*7"},
                },
            },
        )
        obs = reply["data"]["observation"]
        assert obs["tool_name"] == "add_and_execute_code_cell" and obs["result"]["data"] == "42"
        assert obs["step_count"] == 1
        reply = frame(ws, {"type": "step", "data": {"type": "list_tools"}})
        assert len(reply["data"]["observation"]["tools"]) == 7
        state = frame(ws, {"type": "state"})
        assert state["type"] == "state"
        assert state["data"]["episode_id"] == "ws-1" and state["data"]["step_count"] == 2
        assert state["data"]["cells"][0]["source"] == "6*7"
        reply = frame(
            ws,
            {
                "type": "step",
                "data": {
                    "type": "call_tool",
                    "tool_name": "final_answer",
                    "arguments": {"answer": "7319.25"},
                },
            },
        )
        assert reply["data"]["done"] is True and reply["data"]["reward"] == 1.0


def test_malformed_frames_get_error_frames_and_the_socket_stays_open(client):
    with client.websocket_connect("/ws") as ws:
        assert frame(ws, "not json")["data"]["code"] == "INVALID_JSON"
        assert frame(ws, {"type": "bogus"})["data"]["code"] == "UNKNOWN_TYPE"
        reply = frame(ws, {"type": "step", "data": {"foo": 1}})
        assert reply["data"]["code"] == "VALIDATION_ERROR"
        reply = frame(ws, {"type": "reset", "data": {"task_id": "nope"}})
        assert (
            reply["data"]["code"] == "EXECUTION_ERROR"
            and "unknown task_id 'nope'" in reply["data"]["message"]
        )
        reply = frame(ws, {"type": "reset", "data": {"taskid": "tiny-csv"}})
        assert "unknown option 'taskid'" in reply["data"]["message"]
        reply = frame(
            ws,
            {
                "type": "step",
                "data": {
                    "type": "call_tool",
                    "tool_name": "add_and_execute_code_cell",
                    "arguments": {"code": "1"},
                },
            },
        )
        assert "not been reset" in reply["data"]["observation"]["error"]["message"]
        reply = frame(ws, {"type": "reset", "data": {"task_id": "tiny-csv"}})
        assert reply["type"] == "observation", "the same socket still serves episodes"


def test_mcp_json_rpc_session_flow(client):
    def rpc(method, params=None, id_=1):
        return client.post(
            "/mcp", json={"jsonrpc": "2.0", "method": method, "params": params or {}, "id": id_}
        ).json()

    assert client.post("/mcp", json={}).json()["jsonrpc"] == "2.0"
    assert client.post("/mcp", content=b"{not json").json()["error"]["code"] == -32700
    tools = rpc("tools/list")["result"]["tools"]
    assert {t["name"] for t in tools} >= {"run_sql", "final_answer"}
    assert tools[0]["inputSchema"]["type"] == "object"
    sid = rpc("openenv/session/create")["result"]["session_id"]
    with client.websocket_connect(f"/ws?session_id={sid}") as ws:
        assert (
            frame(ws, {"type": "reset", "data": {"task_id": "tiny-sqlite"}})["type"]
            == "observation"
        )
        result = rpc(
            "tools/call",
            {
                "name": "run_sql",
                "arguments": {"query": "SELECT COUNT(*) FROM orders"},
                "session_id": sid,
            },
        )
        assert result["result"]["data"].splitlines()[2] == "3"
        bad = rpc("tools/call", {"name": "run_sql", "arguments": {"query": 5}, "session_id": sid})
        assert "invalid_args" in bad["error"]["message"]
        missing = rpc("tools/call", {"name": "nope", "arguments": {}, "session_id": sid})
        assert "error" in missing
        rpc("tools/call", {"name": "final_answer", "arguments": {"answer": "9"}, "session_id": sid})
        state = frame(ws, {"type": "state"})["data"]
        assert state["done"] and state["reward"] == 1.0 and state["step_count"] == 3
    assert rpc("openenv/session/close", {"session_id": sid})["result"]["session_id"] == sid
    assert "Unknown session_id" in rpc("tools/list", {"session_id": sid})["error"]["message"]


def test_task_api_routes(client):
    splits = client.get("/analyst_env/splits").json()
    assert splits == [{"name": "test", "type": "test"}, {"name": "train", "type": "train"}]
    assert client.post("/analyst_env/num_tasks", json={"split": "train"}).json() == {"num_tasks": 2}
    assert client.post("/analyst_env/num_tasks", json={"split": "nope"}).json() == {"num_tasks": 0}
    task = client.post("/analyst_env/task", json={"split": "train", "index": 0}).json()["task"]
    assert task["id"] == "tiny-csv" and task["index"] == 0
    assert "answer" not in task and "oracle_answer" not in task and "verifier" not in task
    assert client.post("/analyst_env/task", json={"split": "train", "index": 9}).status_code == 400
    rng = client.post(
        "/analyst_env/task_range", json={"split": "test", "start": 1, "stop": 3}
    ).json()["tasks"]
    assert [t["index"] for t in rng] == [1, 2]
    assert len(client.post("/analyst_env/tasks", json={"split": "test"}).json()["tasks"]) == 4
    assert client.get("/other_env/splits").status_code == 404


def test_bearer_token_guards_every_route_but_health(settings, runtime):
    app = build_app(settings.model_copy(update={"token": "s3cret"}), runtime=runtime)
    with TestClient(app) as c:
        assert c.get("/health").status_code == 200
        assert c.get("/metadata").status_code == 401
        assert c.post("/mcp", json={}).status_code == 401
        assert c.get("/metadata", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert c.get("/metadata", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        with pytest.raises(WebSocketDisconnect) as closed:
            with c.websocket_connect("/ws") as ws:
                ws.receive_text()
        assert closed.value.code == 1008
        with c.websocket_connect("/ws", headers={"Authorization": "Bearer s3cret"}) as ws:
            assert (
                frame(ws, {"type": "reset", "data": {"task_id": "tiny-csv"}})["type"]
                == "observation"
            )
