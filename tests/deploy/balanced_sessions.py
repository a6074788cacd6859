"""WebSocket sessions opened through a load balancer, and the replica each one landed on.

The shipped haproxy.cfg tags every response, the WebSocket's 101 included, with
``X-Analyst-Env-Replica``: the name of the backend server that took the connection.
"""

from __future__ import annotations

import asyncio
import json

import websockets
from support import code_step

TASK = "starter-sales-000"
REPLICA_HEADER = "X-Analyst-Env-Replica"


def cell(source: str) -> str:
    """The step frame running ``source`` as a cell, as JSON text."""
    return json.dumps(code_step(source))


async def reply(ws, timeout: float = 120) -> dict:
    return json.loads(await asyncio.wait_for(ws.recv(), timeout=timeout))


class Session:
    """One episode through the balancer: its socket and the replica HAProxy chose."""

    def __init__(self, ws, replica: str) -> None:
        self.ws, self.replica = ws, replica

    @classmethod
    async def open(cls, url: str, token: str | None = None) -> Session:
        """Connect, reset ``TASK`` and run one cell, so the episode is known to work."""
        headers = {"Authorization": f"Bearer {token}"} if token else None
        ws = await websockets.connect(
            url, open_timeout=60, ping_interval=None, max_size=None, additional_headers=headers
        )
        session = cls(ws, ws.response.headers[REPLICA_HEADER])
        await ws.send(json.dumps({"type": "reset", "data": {"task_id": TASK}}))
        assert (await reply(ws))["data"]["observation"]["status"] == "ready"
        await ws.send(cell("print(6 * 7)"))
        assert "42" in json.dumps(await reply(ws))
        return session

    async def lost(self) -> str:
        """What the session sees once its replica is gone: ``closed <code>`` expected."""
        try:
            frame = await reply(self.ws, timeout=30)
        except websockets.ConnectionClosed as exc:
            return f"closed {exc.rcvd.code if exc.rcvd else 'without a close frame'}"
        return f"unexpected frame {frame}"
