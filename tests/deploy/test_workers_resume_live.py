"""Live: under ``serve --workers 2`` a dropped episode resumes whichever worker the new
connection reaches (issues 14 and 18).

The episode stays parked in the worker that ran it; the resume secret names that
worker, and the worker a reconnect reaches relays the socket there. Each worker's
own Unix socket (in the supervisor's directory for them) is used to pick the worker
for certain: an episode started on worker 0 resumes through worker 1 with its
missed reply, its variables and its step count. Through the shared port, an episode
cut and resumed again and again (retrying while its worker has not yet seen the cut,
as the typed client does) keeps its state wherever each connection lands. An HTTP
``/mcp`` session, and a socket attaching to it, are answered by the worker that
holds it, whichever worker the request reaches.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import websockets
from deploy.polling import wait_for
from deploy.test_workers_live import at_least, worker_pids
from server.serve_process import ServeProcess
from support import code_step

pytestmark = pytest.mark.live

TASK = "starter-sales-000"


async def ask(ws, message: dict) -> dict:
    await ws.send(json.dumps(message))
    return json.loads(await asyncio.wait_for(ws.recv(), timeout=60))


def result(reply: dict) -> str:
    return reply["data"]["observation"]["result"]["data"]


def cut(ws) -> None:
    """Drop the connection under the client, as a network failure would (no close frame)."""
    ws.transport.abort()


async def an_http_session_answered_by_the_worker_that_holds_it(w0: str, w1: str) -> None:
    """An HTTP ``/mcp`` session made on worker 0 answers through worker 1, and a socket
    attaching to it there (``/ws?session_id=``) plays its episode."""
    rpc = {"jsonrpc": "2.0", "id": 1}

    def client(path: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=httpx.AsyncHTTPTransport(uds=path), base_url="http://worker", timeout=30
        )

    async with client(w0) as first, client(w1) as other:
        made = await first.post("/mcp", json={**rpc, "method": "openenv/session/create"})
        sid = made.json()["result"]["session_id"]
        listed = await other.post(
            "/mcp", json={**rpc, "method": "tools/list", "params": {"session_id": sid}}
        )
        assert listed.json()["result"]["tools"], listed.text
    async with websockets.unix_connect(w1, f"ws://worker/ws?session_id={sid}") as attached:
        reset = await ask(attached, {"type": "reset", "data": {"task_id": TASK}})
        assert reset["type"] == "observation", reset
        assert result(await ask(attached, code_step("print(6 * 7)"))) == "42"


def test_a_resume_reaching_the_other_worker_is_relayed_to_the_one_that_holds_it(tmp_path):
    with ServeProcess(tmp_path, "--workers", "2", "--log-level", "warning") as server:
        wait_for(lambda: at_least(worker_pids(server.proc.pid), 2), 60, "two workers")
        socks = wait_for(
            lambda: at_least(sorted(server.scratch.glob("analyst-env-peers-*/w*.sock")), 2),
            60,
            "each worker's own socket",
        )
        w0, w1 = (str(p) for p in socks)
        base = server.url.replace("http://", "ws://")

        async def through_the_other_worker():
            first = await websockets.unix_connect(w0, "ws://worker/ws?resume=1")
            reset = await ask(first, {"type": "reset", "data": {"task_id": TASK}})
            episode = reset["data"]["observation"]["episode_id"]
            secret = reset["data"]["metadata"]["resume_secret"]
            assert secret.startswith("w0-"), "the secret names the worker that holds the episode"
            await ask(first, code_step("kept = 41"))
            await first.send(json.dumps(code_step("import time\ntime.sleep(1)\nprint('away')")))
            await asyncio.sleep(0.3)
            cut(first)
            await asyncio.sleep(1.5)  # the step finishes while no socket is attached
            query = f"episode_id={episode}&resume_secret={secret}"
            async with websockets.unix_connect(w1, f"ws://worker/ws?{query}") as back:
                missed = json.loads(await asyncio.wait_for(back.recv(), timeout=30))
                assert result(missed) == "away"
                assert result(await ask(back, code_step("print(kept + 1)"))) == "42"
                state = (await ask(back, {"type": "state"}))["data"]
                assert state["episode_id"] == episode and state["step_count"] == 3
                await back.send(json.dumps({"type": "close"}))

        async def again_and_again_through_the_port():
            ws = await websockets.connect(f"{base}/ws?resume=1", open_timeout=60)
            reset = await ask(ws, {"type": "reset", "data": {"task_id": TASK}})
            episode = reset["data"]["observation"]["episode_id"]
            secret = reset["data"]["metadata"]["resume_secret"]
            await ask(ws, code_step("n = 0"))
            for round_ in range(1, 7):  # each reconnect lands on either worker
                cut(ws)
                for _ in range(50):  # "retry": the server has not seen the cut yet
                    ws = await websockets.connect(
                        f"{base}/ws?episode_id={episode}&resume_secret={secret}", open_timeout=60
                    )
                    try:
                        reply = await ask(ws, code_step("n += 1\nprint(n)"))
                    except websockets.ConnectionClosed:  # refused ("retry") before the step
                        reply = {"type": "error", "data": {"retry": True}}
                    if not (reply["type"] == "error" and reply["data"].get("retry")):
                        break
                    await ws.close()
                    await asyncio.sleep(0.2)
                assert result(reply) == str(round_), reply
            await ws.send(json.dumps({"type": "close"}))
            await ws.close()

        asyncio.run(through_the_other_worker())
        asyncio.run(again_and_again_through_the_port())
        asyncio.run(an_http_session_answered_by_the_worker_that_holds_it(w0, w1))
        held = httpx.get(f"{server.url}/_workers/sessions/x", timeout=10)
        assert held.status_code == 404, "the sibling-only route is not served on the port"
        log = server.log()
    assert "Traceback" not in log, log[-3000:]
