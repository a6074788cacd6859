"""Live: the bearer token is never written to the log, and a query token opens only WebSockets
(issue 14, item 6).

A real ``analyst-env serve --token`` process at log level info (uvicorn's access log
on) gets requests carrying the token in the query string: the /web bootstrap, a
WebSocket upgrade, an HTTP API call. The log must not contain the token anywhere,
the WebSocket must open, the HTTP call must be refused (a query token on plain HTTP
ends up in proxies and history), and a header token still works.
"""

from __future__ import annotations

import json

import httpx
import pytest
import websockets
from server.serve_process import ServeProcess
from websockets.sync.client import connect

pytestmark = pytest.mark.live

TOKEN = "tok-5f2b9c1e-never-logged"


def test_a_query_token_opens_only_websockets_and_never_reaches_the_log(tmp_path):
    with ServeProcess(tmp_path, "--token", TOKEN, "--log-level", "info") as server:
        ws = server.url.replace("http://", "ws://")
        assert httpx.get(f"{server.url}/web?token={TOKEN}").status_code == 200
        assert httpx.get(f"{server.url}/metadata?token={TOKEN}").status_code == 401
        assert httpx.get(f"{server.url}/web/api/tasks?token={TOKEN}").status_code == 401
        assert (
            httpx.get(
                f"{server.url}/metadata", headers={"Authorization": f"Bearer {TOKEN}"}
            ).status_code
            == 200
        )
        assert (
            httpx.get(
                f"{server.url}/metadata", headers={"Authorization": "Bearer wrong"}
            ).status_code
            == 401
        )

        # The synchronous client: a browser fixture of an earlier test (Playwright's sync API)
        # may still hold a running event loop in this thread, where asyncio.run refuses.
        with connect(f"{ws}/ws?token={TOKEN}") as sock:
            sock.send(json.dumps({"type": "reset", "data": {"task_id": "starter-sales-000"}}))
            assert json.loads(sock.recv(timeout=60))["type"] == "observation"

        with pytest.raises(websockets.InvalidStatus, match="403"):  # refused before accept
            with connect(f"{ws}/ws?token=wrong") as sock:
                sock.recv(timeout=60)
        log = server.log()
    assert "GET /web?token=***" in log, (
        "the access log is on in this test: the request line must be there, redacted"
    )
    assert "/ws?token=***" in log
    assert TOKEN not in log
