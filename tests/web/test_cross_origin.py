"""Another site's page, open in the operator's browser, cannot use a server without a token.

WebSockets are outside the same-origin policy and a ``text/plain`` POST needs no
preflight, so only the server can refuse them: it does by their ``Origin``. The
attacking page is served by the browser itself (a routed address), as a site on
the internet would be.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
from collections.abc import Iterator

import httpx
import pytest
import websockets
import websockets.sync.client as ws_client
from webui_support import open_web

pytestmark = pytest.mark.live

ATTACK_PAGE = """<!doctype html><script>
window.outcome = new Promise((resolve) => {
  const ws = new WebSocket(%(ws)s + "/web/api/live/ws");
  ws.onmessage = (e) => resolve("read: " + e.data.slice(0, 40));
  ws.onerror = () => resolve("refused");
});
window.reset = new Promise((resolve) => {
  const ws = new WebSocket(%(ws)s + "/ws");
  ws.onopen = () => ws.send(JSON.stringify({type: "reset", data: {}}));
  ws.onmessage = (e) => resolve("episode: " + e.data.slice(0, 40));
  ws.onerror = () => resolve("refused");
});
</script>"""


@contextlib.contextmanager
def attacker_site(page_html: str) -> Iterator[str]:
    """A site on another loopback port that serves ``page_html`` at every path; its URL."""
    body = page_html.encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def test_another_sites_page_cannot_open_the_sockets(browser, web_url):
    ws_base = json.dumps(web_url.replace("http://", "ws://"))
    context = browser.new_context()
    try:
        page = context.new_page()
        with attacker_site(ATTACK_PAGE % {"ws": ws_base}) as attacker:
            page.goto(f"{attacker}/")
            assert page.evaluate("window.outcome") == "refused"
            assert page.evaluate("window.reset") == "refused"
        # The server's own page, in the same browser, still plays episodes over the same sockets.
        open_web(page, web_url, "#/live")
        assert page.locator("#live-table").count() == 1
    finally:
        context.close()


def test_requests_naming_another_origin_are_refused_and_the_own_origin_passes(web_url):
    host = web_url.removeprefix("http://")
    rpc = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'
    for origin in ("http://attacker.test", "null", f"http://{host}.attacker.test"):
        headers = {"Origin": origin, "Content-Type": "text/plain"}
        refused = httpx.post(f"{web_url}/mcp", content=rpc, headers=headers)
        assert refused.status_code == 403, origin
        assert "cross-origin request refused" in refused.json()["detail"]
        assert httpx.get(f"{web_url}/web/api/trajectories", headers=headers).status_code == 403
        with pytest.raises(websockets.exceptions.InvalidStatus):
            with ws_client.connect(f"{web_url.replace('http://', 'ws://')}/ws", origin=origin):
                pass
    own = {"Origin": web_url, "Content-Type": "application/json"}
    assert httpx.post(f"{web_url}/mcp", content=rpc, headers=own).status_code == 200
    proxied = {"Origin": "https://analyst.example", "X-Forwarded-Host": "analyst.example"}
    assert httpx.get(f"{web_url}/web/api/info", headers=proxied).status_code == 200
    assert httpx.get(f"{web_url}/web/api/info").status_code == 200  # no Origin: not a browser
    with ws_client.connect(f"{web_url.replace('http://', 'ws://')}/ws", origin=web_url) as ws:
        ws.send(json.dumps({"type": "reset", "data": {}}))
        assert json.loads(ws.recv(timeout=120))["type"] == "observation"


def test_another_sites_page_cannot_frame_the_page(browser, web_url):
    """No click on the page can be tricked by a site that lays it under its own."""
    context = browser.new_context()
    try:
        page = context.new_page()
        with attacker_site(f'<iframe id="victim" src="{web_url}/web"></iframe>') as attacker:
            page.goto(f"{attacker}/")
            page.wait_for_load_state("load")
            framed = page.frames[1]
            assert framed.evaluate("document.querySelector('#view') === null")
        policy = httpx.get(f"{web_url}/web").headers["content-security-policy"]
        # the one site allowed to frame it: the Hugging Face page of a Space that publishes it
        assert "frame-ancestors 'self' https://huggingface.co;" in policy + ";"
    finally:
        context.close()
