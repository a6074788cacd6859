"""One scored episode over the WebSocket protocol, as a backend's served test plays it.

A reset of a shipped starter task, one cell that must print 42, and the oracle's answer,
which must end the episode with reward 1.0. Used by every test that checks "``serve``
on backend X runs and scores an episode" (fakes of vendor APIs and the opt-in live
services alike), so they all ask the same of a backend.
"""

from __future__ import annotations

import asyncio
import json

import websockets

from analyst_env.datasets import load_dataset

STARTER_TASK = "starter-sales-000"


def step_frame(tool: str, **arguments) -> str:
    """The WebSocket frame that calls ``tool`` with ``arguments``."""
    action = {"type": "call_tool", "tool_name": tool, "arguments": arguments}
    return json.dumps({"type": "step", "data": action})


def assert_oracle_episode_scores(
    url: str, *, timeout_s: float, task_id: str = STARTER_TASK
) -> None:
    """Play reset, ``print(6 * 7)`` and the oracle's answer at ``url``; assert each reply."""
    oracle = next(t for t in load_dataset("starter").tasks if t.id == task_id).oracle_answer

    async def episode() -> list[dict]:
        ws_url = url.replace("http://", "ws://") + "/ws"
        async with websockets.connect(ws_url, open_timeout=60, max_size=None) as ws:
            replies = []
            for frame in (
                json.dumps({"type": "reset", "data": {"task_id": task_id}}),
                step_frame("add_and_execute_code_cell", code="print(6 * 7)"),
                step_frame("final_answer", answer=oracle),
            ):
                await ws.send(frame)
                replies.append(json.loads(await asyncio.wait_for(ws.recv(), timeout=timeout_s)))
            return replies

    reset, ran, answered = asyncio.run(episode())
    assert reset["data"]["observation"]["status"] == "ready", reset
    assert "42" in json.dumps(ran), ran
    assert answered["data"]["done"] is True and answered["data"]["reward"] == 1.0, answered
