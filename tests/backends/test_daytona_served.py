"""``ANALYST_ENV_BACKEND=daytona analyst-env serve`` end to end, against the fake Daytona API.

The server is a real child process with the unmodified SDK, configured only by the
SDK's own variables (``DAYTONA_API_KEY``, ``DAYTONA_API_URL``); one episode goes
through the WebSocket protocol and is scored by the oracle's answer, like the live
test in ``tests/deploy/test_remote_backends_live.py``.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import websockets
from server.serve_process import ServeProcess

from analyst_env.datasets import load_dataset

pytestmark = pytest.mark.live

TASK = "starter-sales-000"


def _call(tool: str, **arguments) -> str:
    action = {"type": "call_tool", "tool_name": tool, "arguments": arguments}
    return json.dumps({"type": "step", "data": action})


def test_a_served_episode_runs_and_scores_on_the_daytona_backend(daytona_api, tmp_path):
    oracle = next(t for t in load_dataset("starter").tasks if t.id == TASK).oracle_answer
    env = {
        "ANALYST_ENV_BACKEND": "daytona",
        "DAYTONA_API_KEY": daytona_api.api_key,
        "DAYTONA_API_URL": daytona_api.api_url,
    }
    with ServeProcess(tmp_path, env=env, startup_timeout_s=180) as server:
        health = httpx.get(f"{server.url}/health", timeout=30).json()
        assert health["sandbox"]["backend"] == "daytona"

        async def episode() -> list[dict]:
            ws_url = server.url.replace("http://", "ws://") + "/ws"
            async with websockets.connect(ws_url, open_timeout=60, max_size=None) as ws:
                replies = []
                for frame in (
                    json.dumps({"type": "reset", "data": {"task_id": TASK}}),
                    _call("add_and_execute_code_cell", code="print(6 * 7)"),
                    _call("final_answer", answer=oracle),
                ):
                    await ws.send(frame)
                    replies.append(json.loads(await asyncio.wait_for(ws.recv(), timeout=180)))
                return replies

        reset, ran, answered = asyncio.run(episode())
        assert reset["data"]["observation"]["status"] == "ready", reset
        assert "42" in json.dumps(ran)
        assert answered["data"]["done"] is True and answered["data"]["reward"] == 1.0, answered
        metrics = httpx.get(f"{server.url}/metrics", timeout=30).text
    assert 'analyst_env_sandbox_failures_total{stage="reset"} 0.0' in metrics
    served = {sb.id for sb in daytona_api.sandboxes.values() if sb.body["labels"]}
    assert served, "the server created no sandbox on the fake Daytona API"


@pytest.mark.parametrize("key", ["", "wrong-key"])
def test_serve_refuses_to_start_without_usable_daytona_credentials(daytona_api, tmp_path, key):
    env = {
        "ANALYST_ENV_BACKEND": "daytona",
        "DAYTONA_API_KEY": key,
        "DAYTONA_API_URL": daytona_api.api_url,
    }
    with pytest.raises(RuntimeError, match="exited with 2") as failed:
        with ServeProcess(tmp_path, env=env, startup_timeout_s=120):
            pass
    expected = "set DAYTONA_API_KEY" if not key else "refused the request"
    assert expected in str(failed.value) and "Traceback" not in str(failed.value)
