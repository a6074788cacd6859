"""A loopback server without a token answers only to its own addresses, not to a rebound DNS name.

DNS rebinding makes another site's page same-origin with the server: the site's
name is resolved again to 127.0.0.1, so the browser sends ``Host:
<that name>`` and an ``Origin`` that matches it. ``analyst-env serve`` on
loopback without a token refuses a dotted DNS name in ``Host``.
"""

from __future__ import annotations

import json

import httpx
import pytest
import websockets
import websockets.sync.client as ws_client
from server.serve_process import ServeProcess

from analyst_env.server.local_server import serving
from analyst_env.server.settings import Settings

pytestmark = pytest.mark.live


def test_a_rebound_name_reaches_nothing_and_loopback_names_do(tmp_path):
    with ServeProcess(tmp_path) as server:
        port = server.port
        for host in (f"rebind.attacker.test:{port}", f"rebind.attacker.test.:{port}", "[::1"):
            for path in ("/web/api/trajectories", "/web/api/info", "/health", "/web"):
                refused = httpx.get(f"{server.url}{path}", headers={"Host": host})
                assert refused.status_code == 403, (host, path)
                assert "refused" in refused.json()["detail"]
            with pytest.raises(websockets.exceptions.InvalidStatus):
                with ws_client.connect(
                    f"ws://127.0.0.1:{port}/ws",
                    additional_headers={"Host": host},
                    origin=f"http://{host}",
                ):
                    pass
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "worker"):
            assert (
                httpx.get(f"{server.url}/web/api/info", headers={"Host": host}).status_code == 200
            )
        with ws_client.connect(f"ws://localhost:{port}/ws") as ws:
            ws.send(json.dumps({"type": "reset", "data": {}}))
            assert json.loads(ws.recv(timeout=120))["type"] == "observation"


def test_a_server_with_a_token_answers_any_host_name(tmp_path):
    with ServeProcess(tmp_path, "--token", "t0k") as server:
        response = httpx.get(
            f"{server.url}/web/api/info",
            headers={"Host": f"analyst.example:{server.port}", "Authorization": "Bearer t0k"},
        )
        assert response.status_code == 200


def test_the_in_process_server_of_a_command_refuses_a_rebound_name_too(tmp_path):
    """``analyst-env eval`` without ``--url`` serves on loopback without a token while it runs."""
    settings = Settings(dataset="starter", state_dir=str(tmp_path), standbys=0)
    with serving(settings, sessions=1) as url:
        port = url.rsplit(":", 1)[1]
        rebound = {"Host": f"rebind.attacker.test:{port}"}
        assert httpx.get(f"{url}/web/api/info", headers=rebound).status_code == 403
        assert httpx.get(f"{url}/web/api/info").status_code == 200
