"""Live: the /web live view and /ready of ``serve --workers 2`` show the whole server (issue 18).

Each worker holds its own sessions, and a viewer's connection reaches one of them.
Whichever it reaches, the session list (HTTP and the live feed) must hold every
worker's sessions, one session's feed must open from either worker (relayed from
the worker that holds it), and a step on any session must reach a viewer on any
worker. ``/ready`` counts every worker's sessions and slots, whichever answers.
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
MAX_SESSIONS = 40


async def frame(ws, message: dict) -> dict:
    await ws.send(json.dumps(message))
    return json.loads(await asyncio.wait_for(ws.recv(), timeout=60))


def listed(url: str) -> list[dict]:
    with httpx.Client() as client:  # a new connection: the kernel picks a worker
        return client.get(f"{url}/web/api/live", timeout=10).json()["sessions"]


def workers_of(sessions: list[dict]) -> set[str]:
    return {s["session_id"].split("-")[0] for s in sessions}


def test_either_workers_live_view_shows_and_relays_every_workers_sessions(tmp_path):
    with ServeProcess(
        tmp_path, "--workers", "2", "--max-sessions", str(MAX_SESSIONS), "--log-level", "warning"
    ) as server:
        wait_for(lambda: at_least(worker_pids(server.proc.pid), 2), 60, "two workers")
        base = server.url.replace("http://", "ws://")

        async def main():
            socks, episodes = [], []
            # the kernel hands each connection to a worker: open sessions until both hold some
            while len(socks) < 6 or len(workers_of(listed(server.url))) < 2:
                assert len(socks) < MAX_SESSIONS, "every session landed on one worker"
                ws = await websockets.connect(f"{base}/ws", open_timeout=60)
                reply = await frame(ws, {"type": "reset", "data": {"task_id": TASK}})
                episodes.append(reply["data"]["observation"]["episode_id"])
                socks.append(ws)
            for _ in range(6):
                sessions = listed(server.url)
                assert {s["episode_id"] for s in sessions if not s["closed"]} == set(episodes)
            session_of = {s["episode_id"]: s["session_id"] for s in sessions}
            for _ in range(4):
                with httpx.Client() as client:
                    ready = client.get(f"{server.url}/ready", timeout=10).json()
                assert ready == {
                    "status": "ready",
                    "live_sessions": len(socks),
                    "max_sessions": 2 * MAX_SESSIONS,
                    "workers": 2,
                }

            for _ in range(4):  # the list feed, from whichever worker, starts with all of them
                async with websockets.connect(f"{base}/web/api/live/ws") as viewer:
                    first = json.loads(await asyncio.wait_for(viewer.recv(), timeout=30))
                    assert first["type"] == "sessions"
                    assert {s["episode_id"] for s in first["sessions"]} >= set(episodes)

            for sid in session_of.values():  # each session's feed opens from either worker
                for _ in range(2):
                    async with websockets.connect(f"{base}/web/api/live/ws?session={sid}") as v:
                        history = json.loads(await asyncio.wait_for(v.recv(), timeout=30))
                        assert history["type"] == "history", history
                        assert history["session"]["session_id"] == sid
                        assert history["events"][0]["type"] == "reset"

            for ws, episode in list(zip(socks, episodes))[:4]:  # a step anywhere reaches a
                async with websockets.connect(f"{base}/web/api/live/ws") as viewer:  # viewer
                    await asyncio.wait_for(viewer.recv(), timeout=30)  # on either worker
                    reply = await frame(ws, code_step("6 * 7"))
                    assert reply["type"] == "observation"
                    while True:
                        update = json.loads(await asyncio.wait_for(viewer.recv(), timeout=30))
                        session = update.get("session") or {}
                        if session.get("episode_id") == episode and session["step_count"] == 1:
                            break

            async with websockets.connect(f"{base}/web/api/live/ws?session=w7-s1") as v:
                refused = json.loads(await asyncio.wait_for(v.recv(), timeout=30))
                assert refused["type"] == "error" and "no live session" in refused["message"]
            for ws in socks:
                await ws.close()

        asyncio.run(main())
        log = server.log()
    assert "Traceback" not in log, log[-3000:]
