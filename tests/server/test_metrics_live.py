"""Live: ``/metrics``, capacity in ``/ready`` and JSON logs of a real ``analyst-env serve``.

One server process with a token, ``--max-sessions 2`` and ``ANALYST_ENV_LOG_FORMAT=json``
gets episodes over ``/ws``: good resets and steps, a reset for a task that does not
exist, a made-up tool name, a cell that kills its own kernel. The counters must
say exactly that, the gauges must follow the open sessions, ``/ready`` must turn 503
``full`` at the session limit and back to ready when a session ends, ``/metrics``
must need the token, and every log line the server writes must be a JSON object.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import websockets
from prometheus_client.parser import text_string_to_metric_families
from server.serve_process import ServeProcess

pytestmark = pytest.mark.live

TOKEN = "metrics-token-3a7f"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
TASK = "starter-sales-000"


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    """``{(sample name, sorted labels): value}`` of one ``GET /metrics``."""
    response = httpx.get(f"{url}/metrics", headers=AUTH, timeout=10)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def call(tool: str, **arguments) -> dict:
    action = {"type": "call_tool", "tool_name": tool, "arguments": arguments}
    return {"type": "step", "data": action}


async def frame(ws, message: dict) -> dict:
    await ws.send(json.dumps(message))
    return json.loads(await asyncio.wait_for(ws.recv(), timeout=60))


def test_metrics_count_what_happened_and_ready_reflects_capacity(tmp_path):
    env = {"ANALYST_ENV_LOG_FORMAT": "json"}
    with ServeProcess(
        tmp_path, "--token", TOKEN, "--max-sessions", "2", "--log-level", "info", env=env
    ) as server:
        ws_url = server.url.replace("http://", "ws://") + f"/ws?token={TOKEN}"
        assert httpx.get(f"{server.url}/metrics").status_code == 401, "metrics need the token"
        before = scrape(server.url)
        assert before[("analyst_env_sessions_live", ())] == 0
        assert before[("analyst_env_sessions_max", ())] == 2
        assert before[("analyst_env_draining", ())] == 0
        assert ("analyst_env_standby_kernels", ()) in before
        assert before[("analyst_env_kernels_on_order", ())] == 0
        assert before.get(("analyst_env_resets_total", (("status", "ready"),)), 0) == 0

        async def episodes():
            async with websockets.connect(ws_url) as first:
                assert (await frame(first, {"type": "reset", "data": {"task_id": TASK}}))[
                    "type"
                ] == "observation"
                ran = await frame(first, call("add_and_execute_code_cell", code="print(6 * 7)"))
                assert "42" in json.dumps(ran)
                await frame(first, call("no_such_tool_1"))
                await frame(first, call("no_such_tool_2"))
                refused = await frame(first, {"type": "reset", "data": {"task_id": "no-such-task"}})
                assert refused["type"] == "error"
                during = scrape(server.url)
                assert during[("analyst_env_sessions_live", ())] == 1
                assert httpx.get(f"{server.url}/ready").json() == {
                    "status": "ready",
                    "live_sessions": 1,
                    "max_sessions": 2,
                }
                async with websockets.connect(ws_url) as second:
                    await frame(second, {"type": "reset", "data": {"task_id": TASK}})
                    full = httpx.get(f"{server.url}/ready")
                    assert full.status_code == 503
                    assert full.json() == {"status": "full", "live_sessions": 2, "max_sessions": 2}
                    died = await frame(
                        second,
                        call(
                            "add_and_execute_code_cell",
                            code="import os, signal\nos.kill(os.getpid(), signal.SIGKILL)",
                        ),
                    )
                    assert "KernelDied" in json.dumps(died)
                await asyncio.sleep(0.5)  # the second session's teardown
                assert httpx.get(f"{server.url}/ready").status_code == 200
                return during

        asyncio.run(episodes())
        after = scrape(server.url)
        log = server.log()

    def count(name: str, **labels) -> float:
        return after.get((name, tuple(sorted(labels.items()))), 0)

    assert count("analyst_env_resets_total", status="ready") == 2
    assert count("analyst_env_errors_total", operation="reset", reason="TaskNotFoundError") == 1
    assert count("analyst_env_reset_seconds_count") == 3
    assert count("analyst_env_steps_total", tool="add_and_execute_code_cell") == 2
    assert count("analyst_env_steps_total", tool="other") == 2, "made-up tool names share one label"
    assert count("analyst_env_errors_total", operation="step", reason="tool_not_found") == 2
    assert count("analyst_env_step_seconds_count") == 4
    assert count("analyst_env_step_seconds_bucket", le="+Inf") == 4
    assert 0 < count("analyst_env_reset_seconds_sum") < 120
    assert count("analyst_env_kernel_restarts_total", reason="died") == 1
    assert count("analyst_env_kernel_restarts_total", reason="timeout") == 0
    assert ("analyst_env_sandbox_failures_total", (("stage", "step"),)) in after, "shown at 0"
    assert count("analyst_env_sessions_live") == 0

    lines = [line for line in log.splitlines() if line.startswith("{")]
    records = [json.loads(line) for line in lines]
    assert any(
        r["logger"] == "uvicorn.error" and "Uvicorn running" in r["message"] for r in records
    )
    access = [r for r in records if r["logger"] == "uvicorn.access"]
    assert {"path": "/metrics", "status": 401} in [
        {"path": r["path"], "status": r["status"]} for r in access
    ]
    assert TOKEN not in log
    stray = [line for line in log.splitlines() if "INFO:" in line or "WARNING:" in line]
    assert not stray, f"text log lines in JSON mode: {stray[:3]}"
