"""Live fault injection (issue 14): the faults a long training run meets, against a real server.

Kernel crashes mid-cell are in ``test_live.py`` (hostile code) and SIGTERM with a
step running in ``test_drain_live.py``; here: the zygote killed while episodes are
live, a client that vanishes mid-step without asking to resume, SIGTERM with many
sessions busy, and a server restarted on the same state directory.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import time

import pytest
import websockets
from server.serve_process import ServeProcess
from support import code_step

from analyst_env.server.app import build_app
from analyst_env.server.local_server import BackgroundServer

pytestmark = pytest.mark.live


def code(source: str) -> str:
    """The step frame running ``source`` as a cell, as JSON text."""
    return json.dumps(code_step(source))


async def ask(ws, frame: str) -> dict:
    await ws.send(frame)
    return json.loads(await asyncio.wait_for(ws.recv(), timeout=60))


RESET = json.dumps({"type": "reset", "data": {"task_id": "tiny-csv"}})


def structured(reply: dict) -> dict:
    return reply["data"]["observation"]["result"]["structured_content"]


async def probe_until_restarted(ws) -> dict:
    """Run a cell reading ``kept`` until one reports the kernel restarted; return that result.

    The zygote's death reaches its kernels a moment later (its PID 1 gets a death
    signal, then the namespace is emptied), so the first probes may still run in
    the old kernel: they must see ``kept`` intact, never a silent loss.
    """
    for _ in range(50):
        result = structured(await ask(ws, code("print(globals().get('kept', 'gone'))")))
        if result["kernel_restarted"]:
            return result
        assert result["stdout"] == "1\n", result  # still the old kernel, state intact
        await asyncio.sleep(0.1)
    raise AssertionError("the kernels of a killed zygote kept running")


def test_a_killed_zygote_restarts_the_kernels_of_live_episodes_with_a_clear_message(app, runtime):
    async def main(base):
        ws_url = base.replace("http://", "ws://") + "/ws"
        async with websockets.connect(ws_url) as a, websockets.connect(ws_url) as b:
            for ws in (a, b):
                await ask(ws, RESET)
                await ask(ws, code("kept = 1"))
            zygote = runtime.backend._zygotes.pid("default")
            os.kill(zygote, signal.SIGKILL)
            for ws in (a, b):
                restarted = await probe_until_restarted(ws)
                assert restarted["error"]["name"] == "KernelDied", restarted
                assert "restarted" in restarted["error"]["value"], restarted
                again = structured(await ask(ws, code("print(globals().get('kept', 'gone'))")))
                assert (again["stdout"], again["kernel_restarted"]) == ("gone\n", False), again
        async with websockets.connect(ws_url) as fresh:
            await ask(fresh, RESET)
            assert (await ask(fresh, code("print(1)")))["data"]["observation"]["result"][
                "data"
            ] == "1"

    with BackgroundServer(app) as base:
        asyncio.run(main(base))


def test_a_client_gone_mid_step_frees_its_session_and_others_keep_working(settings, runtime):
    app = build_app(settings.model_copy(update={"max_sessions": 2}), runtime=runtime)

    async def main(base):
        ws_url = base.replace("http://", "ws://") + "/ws"
        async with websockets.connect(ws_url) as bystander:
            await ask(bystander, RESET)
            gone = await websockets.connect(ws_url)
            await ask(gone, RESET)
            await gone.send(code("import time\ntime.sleep(1.5)"))
            await asyncio.sleep(0.3)
            gone.transport.get_extra_info("socket").shutdown(socket.SHUT_RDWR)
            gone.transport.abort()
            reply = await ask(bystander, code("print('unaffected')"))
            assert reply["data"]["observation"]["result"]["data"] == "unaffected"
            sessions = app.state.sessions
            deadline = time.monotonic() + 10
            while len(sessions) > 1 and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert len(sessions) == 1, "the vanished client's session was kept"
            async with websockets.connect(ws_url) as next_one:  # its slot is free again
                assert (await ask(next_one, RESET))["type"] == "observation"

    with BackgroundServer(app) as base:
        asyncio.run(main(base))


TASK = "starter-sales-000"


def test_sigterm_with_many_busy_sessions_finishes_their_steps_and_exits_clean(tmp_path):
    with ServeProcess(tmp_path) as server:
        ws_url = server.url.replace("http://", "ws://") + "/ws"

        async def main():
            sockets = [await websockets.connect(ws_url) for _ in range(12)]
            for ws in sockets:
                await ask(ws, json.dumps({"type": "reset", "data": {"task_id": TASK}}))
            for i, ws in enumerate(sockets):
                await ws.send(code(f"import time\ntime.sleep(1)\nprint({i})"))
            await asyncio.sleep(0.3)
            server.proc.send_signal(signal.SIGTERM)
            for i, ws in enumerate(sockets):
                reply = json.loads(await asyncio.wait_for(ws.recv(), timeout=60))
                assert reply["data"]["observation"]["result"]["data"] == str(i), reply
                with pytest.raises(websockets.ConnectionClosed):
                    await asyncio.wait_for(ws.recv(), timeout=30)
                assert ws.close_code == 1001

        asyncio.run(main())
        assert server.proc.wait(timeout=60) == 0, server.log()
        assert "Traceback" not in server.log(), server.log()
    assert not list(server.scratch.glob("analyst-env-local-*"))


def test_a_server_restarted_on_the_same_state_dir_serves_and_keeps_earlier_trajectories(tmp_path):
    async def episode(url: str) -> str:
        async with websockets.connect(url.replace("http://", "ws://") + "/ws") as ws:
            first = await ask(ws, json.dumps({"type": "reset", "data": {"task_id": TASK}}))
            reply = await ask(ws, code("print('hello')"))
            assert reply["data"]["observation"]["result"]["data"] == "hello"
            await ws.send(json.dumps({"type": "close"}))
            return first["data"]["observation"]["episode_id"]

    episodes = []
    for _ in range(2):
        with ServeProcess(tmp_path) as server:
            episodes.append(asyncio.run(episode(server.url)))
            server.proc.send_signal(signal.SIGTERM)
            assert server.proc.wait(timeout=60) == 0, server.log()
            assert "Traceback" not in server.log(), server.log()
    assert episodes[0] != episodes[1]
    recorded = {
        json.loads(p.read_text().splitlines()[0]).get("episode_id")
        for p in (tmp_path / "state" / "trajectories").rglob("*.jsonl")
    }
    assert set(episodes) <= recorded, (episodes, recorded)
    assert not list((tmp_path / "scratch").glob("analyst-env-local-*"))
