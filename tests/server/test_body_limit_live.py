"""An HTTP body over the cap is a 413, declared or chunked, and the server goes on serving.

Without the cap a body of any size was read whole and parsed: 300 MB sent to
``/reset`` grew the server by more than half a gigabyte, which it kept.
"""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

import httpx
import pytest

from analyst_env.server.body_limit import MAX_MESSAGE_BYTES
from analyst_env.server.local_server import BackgroundServer

pytestmark = pytest.mark.live

MIB = 2**20


@pytest.fixture(scope="module")
def url(app):
    with BackgroundServer(app) as base:
        yield base


def test_a_declared_body_over_the_cap_is_refused_before_it_is_sent(url):
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    conn.putrequest("POST", "/reset")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", str(MAX_MESSAGE_BYTES + 1))
    conn.endheaders()
    conn.send(b'{"seed": 1')  # the rest never comes: the answer must not wait for it
    response = conn.getresponse()
    assert response.status == 413
    assert "request body over" in json.loads(response.read())["detail"]
    conn.close()


def test_a_chunked_body_over_the_cap_is_refused_and_one_under_it_is_read(url):
    def chunks(count: int, size: int = MIB):
        yield b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"pad": "'
        for _ in range(count):
            yield b"x" * size
        yield b'"}}'

    over = MAX_MESSAGE_BYTES // MIB + 1
    response = httpx.post(f"{url}/mcp", content=chunks(over), timeout=120)
    assert response.status_code == 413, response.text[:200]
    under = httpx.post(f"{url}/mcp", content=chunks(2), timeout=120)
    assert under.status_code == 200 and "tools" in under.json()["result"]
    assert httpx.post(f"{url}/reset", json={"task_id": "tiny-csv"}, timeout=120).status_code == 200
