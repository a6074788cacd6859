"""Live: SIGTERM and SIGINT drain the server (issue 14, item 5).

A real ``analyst-env serve`` process has a step running in one episode and a second
episode held by an HTTP ``/mcp`` session with no socket. On the signal: ``/ready``
says draining, a new WebSocket is refused with close code 1001 and an error frame
(a new /web live-feed viewer with 1001, and an open one is closed with 1001),
the running step finishes and its observation arrives, every episode's trajectory
ends with its ``close`` record, the process exits 0, the backend's scratch
directory (``analyst-env-local-*``) is gone and the log has no traceback.
"""

from __future__ import annotations

import asyncio
import json
import signal

import httpx
import pytest
import websockets
from server.serve_process import ServeProcess
from support import code_step

pytestmark = pytest.mark.live

TASK = "starter-sales-000"


async def frame(ws, message: dict) -> dict:
    await ws.send(json.dumps(message))
    return json.loads(await asyncio.wait_for(ws.recv(), timeout=60))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_drains_finishes_running_steps_and_leaves_nothing_behind(tmp_path, sig):
    with ServeProcess(tmp_path, "--log-level", "info") as server:
        ws_base = server.url.replace("http://", "ws://")
        assert httpx.get(f"{server.url}/ready").json()["status"] == "ready"
        rpc = {"jsonrpc": "2.0", "id": 1}
        sid = httpx.post(
            f"{server.url}/mcp", json={**rpc, "method": "openenv/session/create"}
        ).json()["result"]["session_id"]

        async def main():
            async with websockets.connect(
                f"{ws_base}/ws?session_id={sid}"
            ) as held:  # an episode with no socket later
                assert (await frame(held, {"type": "reset", "data": {"task_id": TASK}}))[
                    "type"
                ] == "observation"
            viewer = await websockets.connect(f"{ws_base}/web/api/live/ws")
            assert (
                json.loads(await asyncio.wait_for(viewer.recv(), timeout=10))["type"] == "sessions"
            )
            async with websockets.connect(f"{ws_base}/ws") as busy:
                assert (await frame(busy, {"type": "reset", "data": {"task_id": TASK}}))[
                    "type"
                ] == "observation"
                # Long enough that every check below runs while the step is still in
                # flight, even on a loaded machine (the drain stops listening once it ends).
                await busy.send(
                    json.dumps(code_step("import time\ntime.sleep(8)\nprint('finished')"))
                )
                await asyncio.sleep(0.7)
                server.proc.send_signal(sig)
                await asyncio.sleep(0.5)
                ready = httpx.get(f"{server.url}/ready")
                assert ready.status_code == 503 and ready.json()["status"] == "draining"
                created = httpx.post(
                    f"{server.url}/mcp", json={**rpc, "method": "openenv/session/create"}
                ).json()
                assert (
                    created["error"]["code"] == -32000
                    and "shutting down" in created["error"]["message"]
                )
                listed = httpx.post(
                    f"{server.url}/mcp",
                    json={**rpc, "method": "tools/list", "params": {"session_id": sid}},
                ).json()
                assert listed["result"]["tools"], (
                    "an existing session must still answer while the server drains"
                )
                async with websockets.connect(f"{ws_base}/ws") as late:
                    refused = json.loads(await asyncio.wait_for(late.recv(), timeout=10))
                    assert (
                        refused["type"] == "error" and "shutting down" in refused["data"]["message"]
                    )
                    assert refused["data"]["draining"] is True  # machine-readable, not only prose
                    with pytest.raises(websockets.ConnectionClosed):
                        await asyncio.wait_for(late.recv(), timeout=10)
                    assert late.close_code == 1001
                async with websockets.connect(f"{ws_base}/web/api/live/ws") as late_viewer:
                    with pytest.raises(websockets.ConnectionClosed):
                        await asyncio.wait_for(late_viewer.recv(), timeout=10)
                    assert late_viewer.close_code == 1001
                reply = json.loads(await asyncio.wait_for(busy.recv(), timeout=60))
                assert reply["data"]["observation"]["result"]["data"] == "finished", reply
                with pytest.raises(websockets.ConnectionClosed):
                    await asyncio.wait_for(busy.recv(), timeout=30)
                assert busy.close_code == 1001
            with pytest.raises(websockets.ConnectionClosed):
                while True:  # live events, then the drain's close
                    await asyncio.wait_for(viewer.recv(), timeout=30)
            assert viewer.close_code == 1001

        try:
            asyncio.run(main())
        except Exception as exc:  # the server's side of the story, for whoever reads the failure
            raise AssertionError(f"{exc!r}\n--- server log ---\n{server.log()}") from exc
        assert server.proc.wait(timeout=60) == 0, server.log()
        log = server.log()
    assert "Traceback" not in log, log
    assert not list(server.scratch.glob("analyst-env-local-*")), (
        "the backend's scratch directory was left behind"
    )
    records = [
        [json.loads(line) for line in path.read_text().splitlines()]
        for path in (tmp_path / "state" / "trajectories").rglob("*.jsonl")
    ]
    assert len(records) == 2, records
    for episode in records:
        assert episode[0]["type"] == "reset" and episode[-1]["type"] == "close", episode
