"""Live tests: uvicorn on a loopback port, driven by unmodified OpenEnv clients.

These are the claims a trainer relies on: OpenEnv's own clients run whole
episodes, 32 sessions run at once with isolated kernels, a full server answers
CAPACITY_REACHED instead of hanging, and model code that crashes, loops or eats
memory in one session leaves the server and every other session working.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys

import pytest
import websockets
from openenv.core import GenericEnvClient, MCPToolClient
from support import code_step

from analyst_env.client import AnalystEnv
from analyst_env.server.app import build_app
from analyst_env.server.local_server import BackgroundServer

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def url(app):
    with BackgroundServer(app) as base_url:
        yield base_url


def ws_url(base_url: str) -> str:
    return base_url.replace("http://", "ws://") + "/ws"


async def ws_frame(ws, message: dict) -> dict:
    await ws.send(json.dumps(message))
    return json.loads(await ws.recv())


def test_generic_env_client_runs_a_full_episode(url):
    with GenericEnvClient(base_url=url).sync() as env:
        first = env.reset(task_id="tiny-csv")
        assert "total amount" in first.observation["instruction"]
        step = env.step(
            {
                "type": "call_tool",
                "tool_name": "run_sql",
                "arguments": {"query": "SELECT SUM(amount) FROM sales"},
            }
        )
        assert "7319.25" in step.observation["result"]["data"]
        final = env.step(
            {"type": "call_tool", "tool_name": "final_answer", "arguments": {"answer": "7319.25"}}
        )
        assert final.done and final.reward == 1.0
        assert env.state()["step_count"] == 2


def test_mcp_tool_client_runs_a_full_episode(url):
    async def episode():
        async with MCPToolClient(base_url=url) as env:
            await env.reset(task_id="tiny-sqlite")
            names = {t.name for t in await env.list_tools()}
            assert "add_and_execute_code_cell" in names
            out = await env.call_tool(
                "add_and_execute_code_cell",
                code="import sqlite3\nsqlite3.connect('shop.sqlite').execute('select sum(qty) "
                "from orders').fetchone()[0]",
            )
            assert out == "13"
            assert (
                await env.call_tool("final_answer", answer="9")
                == "Answer submitted. The episode is over."
            )
            with pytest.raises(RuntimeError, match="episode is over"):
                await env.call_tool("list_files")

    asyncio.run(episode())


def test_typed_client_sync(url):
    with AnalystEnv(base_url=url).sync() as env:
        first = env.reset(task_id="tiny-excel")
        assert first.observation.files[0].preview["sheets"]["people"]["columns"] == ["name", "dept"]
        out = env.add_and_execute_code_cell(
            "import pandas as pd\nint(pd.read_excel('staff.xlsx', sheet_name='depts').budget.max())"
        )
        assert out.observation.text == "20"
        result = env.final_answer("20")
        assert result.done and result.reward == 1.0
        assert env.state().reward == 1.0


def test_32_concurrent_sessions_are_isolated(url):
    n = 32

    async def session(i: int) -> tuple[str, str]:
        async with websockets.connect(ws_url(url), max_size=None) as ws:
            assert (await ws_frame(ws, {"type": "reset", "data": {"task_id": "tiny-csv"}}))[
                "type"
            ] == "observation"
            await ws_frame(ws, code_step(f"secret_{i} = {i}"))
            await asyncio.sleep(0.2)  # all 32 kernels are alive at once here
            own = await ws_frame(ws, code_step(f"print(secret_{i})"))
            other = await ws_frame(ws, code_step(f"print(secret_{(i + 1) % n})"))
            return own["data"]["observation"]["result"]["data"], other["data"]["observation"][
                "result"
            ]["data"]

    async def main():
        return await asyncio.gather(*(session(i) for i in range(n)))

    results = asyncio.run(main())
    for i, (own, other) in enumerate(results):
        assert own == str(i)
        assert "NameError" in other, "a variable from another session leaked"


def test_full_server_answers_capacity_reached(settings, runtime):
    small = build_app(settings.model_copy(update={"max_sessions": 2}), runtime=runtime)

    async def main(base):
        a = await websockets.connect(ws_url(base))
        b = await websockets.connect(ws_url(base))
        await ws_frame(a, {"type": "reset", "data": {"task_id": "tiny-csv"}})
        await ws_frame(b, {"type": "reset", "data": {"task_id": "tiny-csv"}})
        async with websockets.connect(ws_url(base)) as c:
            reply = json.loads(await asyncio.wait_for(c.recv(), timeout=10))
        assert reply["type"] == "error" and reply["data"]["code"] == "CAPACITY_REACHED"
        await a.close()
        await asyncio.sleep(0.3)
        async with websockets.connect(ws_url(base)) as d:
            assert (await ws_frame(d, {"type": "reset", "data": {"task_id": "tiny-csv"}}))[
                "type"
            ] == "observation"
        await b.close()

    with BackgroundServer(small) as base:
        asyncio.run(main(base))


@pytest.mark.parametrize(
    "hostile_code, expect",
    [
        ("import os\nos._exit(1)", "kernel was restarted"),
        ("while True:\n    pass", "TIMEOUT"),
        ("x = bytearray(64 * 1024**3)", "MemoryError"),
        (
            "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass",
            "TIMEOUT",
        ),
    ],
    ids=["crash", "infinite-loop", "memory-bomb", "ignores-interrupt"],
)
def test_hostile_code_leaves_server_and_other_sessions_working(url, hostile_code, expect):
    async def main():
        async with (
            websockets.connect(ws_url(url)) as bystander,
            websockets.connect(ws_url(url)) as attacker,
        ):
            await ws_frame(bystander, {"type": "reset", "data": {"task_id": "tiny-csv"}})
            await ws_frame(bystander, code_step("mine = 'intact'"))
            await ws_frame(attacker, {"type": "reset", "data": {"task_id": "tiny-csv"}})
            attack = asyncio.create_task(ws_frame(attacker, code_step(hostile_code)))
            await asyncio.sleep(0.3)
            during = await ws_frame(bystander, code_step("print(mine)"))
            assert during["data"]["observation"]["result"]["data"] == "intact"
            reply = await asyncio.wait_for(attack, timeout=60)
            assert expect in reply["data"]["observation"]["result"]["data"]
            after = await ws_frame(attacker, code_step("print('alive')"))
            assert "alive" in after["data"]["observation"]["result"]["data"]

    asyncio.run(main())


def test_openenv_validate_passes_against_the_live_server(url):
    exe = shutil.which("openenv") or str(
        __import__("pathlib").Path(sys.executable).with_name("openenv")
    )
    proc = subprocess.run(
        [exe, "validate", "--url", url, "--json"], capture_output=True, text=True, timeout=300
    )
    report = json.loads(proc.stdout[proc.stdout.index("{") :])
    failed = [c["id"] for c in report["criteria"] if not c["passed"]]
    assert report["passed"] and not failed, failed
    assert proc.returncode == 0


def tool_step(tool: str, arguments) -> dict:
    return {
        "type": "step",
        "data": {"type": "call_tool", "tool_name": tool, "arguments": arguments},
    }


BAD_INPUTS = {
    "malformed-json": (
        "{not json",
        lambda r: r["type"] == "error" and r["data"]["code"] == "INVALID_JSON",
    ),
    "unknown-frame-type": ({"type": "explode"}, lambda r: r["data"]["code"] == "UNKNOWN_TYPE"),
    "invalid-step-data": (
        {"type": "step", "data": {"tool": 1}},
        lambda r: r["data"]["code"] == "VALIDATION_ERROR",
    ),
    "bad-reset-option": (
        {"type": "reset", "data": {"task": "tiny-csv"}},
        lambda r: r["type"] == "error" and "unknown option 'task'" in r["data"]["message"],
    ),
    "unknown-tool": (
        tool_step("drop_database", {}),
        lambda r: r["data"]["observation"]["error"]["error_type"] == "tool_not_found",
    ),
    "wrong-argument-type": (
        tool_step("run_sql", {"query": ["SELECT 1"]}),
        lambda r: (
            r["data"]["observation"]["error"]["error_type"] == "invalid_args"
            and "'query'" in r["data"]["observation"]["error"]["message"]
        ),
    ),
    "missing-argument": (
        tool_step("execute_shell_command", {}),
        lambda r: (
            "missing required argument 'command'" in r["data"]["observation"]["error"]["message"]
        ),
    ),
}


@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_bad_input_gets_a_clear_error_and_breaks_nothing(url, name):
    message, is_clear_error = BAD_INPUTS[name]

    async def main():
        async with (
            websockets.connect(ws_url(url)) as bystander,
            websockets.connect(ws_url(url)) as sender,
        ):
            await ws_frame(bystander, {"type": "reset", "data": {"task_id": "tiny-csv"}})
            await ws_frame(bystander, code_step("mine = 'intact'"))
            await ws_frame(sender, {"type": "reset", "data": {"task_id": "tiny-csv"}})
            await sender.send(message if isinstance(message, str) else json.dumps(message))
            reply = json.loads(await sender.recv())
            assert is_clear_error(reply), reply
            after = await ws_frame(sender, code_step("print('sender ok')"))
            assert after["data"]["observation"]["result"]["data"] == "sender ok"
            still = await ws_frame(bystander, code_step("print(mine)"))
            assert still["data"]["observation"]["result"]["data"] == "intact"

    asyncio.run(main())


@pytest.mark.parametrize("when", ["before-reset", "after-done"])
def test_tool_calls_outside_an_episode_are_refused_clearly(url, when):
    async def main():
        async with (
            websockets.connect(ws_url(url)) as bystander,
            websockets.connect(ws_url(url)) as sender,
        ):
            await ws_frame(bystander, {"type": "reset", "data": {"task_id": "tiny-csv"}})
            if when == "after-done":
                await ws_frame(sender, {"type": "reset", "data": {"task_id": "tiny-csv"}})
                done = await ws_frame(sender, tool_step("final_answer", {"answer": "0"}))
                assert done["data"]["done"] is True and done["data"]["reward"] == 0.0
            reply = await ws_frame(sender, code_step("1 + 1"))
            error = reply["data"]["observation"]["error"]
            expected = "not been reset" if when == "before-reset" else "episode is over"
            assert expected in error["message"]
            assert (await ws_frame(bystander, code_step("2 + 2")))["data"]["observation"]["result"][
                "data"
            ] == "4"
            again = await ws_frame(sender, {"type": "reset", "data": {"task_id": "tiny-csv"}})
            assert again["type"] == "observation" and again["data"]["done"] is False

    asyncio.run(main())


def test_idle_mcp_sessions_are_reaped(settings, runtime):
    import time

    import httpx

    app = build_app(settings.model_copy(update={"session_idle_timeout_s": 1.0}), runtime=runtime)
    with BackgroundServer(app) as base:
        rpc = {"jsonrpc": "2.0", "id": 1}
        sid = httpx.post(f"{base}/mcp", json={**rpc, "method": "openenv/session/create"}).json()[
            "result"
        ]["session_id"]
        time.sleep(6.5)  # no activity: the reaper (which wakes every 5 s) must drop it
        reply = httpx.post(
            f"{base}/mcp", json={**rpc, "method": "tools/list", "params": {"session_id": sid}}
        ).json()
        assert "Unknown session_id" in reply["error"]["message"]
        fresh = httpx.post(f"{base}/mcp", json={**rpc, "method": "openenv/session/create"}).json()
        assert "session_id" in fresh["result"], "the server still creates sessions after reaping"
