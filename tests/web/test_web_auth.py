"""/web on a server with a bearer token: the page asks for it, and nothing with data opens without
it."""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

import httpx
import pytest
import websockets
import websockets.sync.client as ws_client
from playwright.sync_api import expect
from webui_support import open_web, run_in_editor, starter_server, starter_task, wait_for_cells

pytestmark = pytest.mark.live

TOKEN = "s3cret-web-token"


@pytest.fixture(scope="module")
def token_url(tmp_path_factory):
    with starter_server(tmp_path_factory.mktemp("web-token-state"), token=TOKEN) as url:
        yield url


def test_data_routes_need_the_token_but_the_page_shell_does_not(token_url):
    assert httpx.get(f"{token_url}/web").status_code == 200
    assert httpx.get(f"{token_url}/web/", follow_redirects=True).status_code == 200
    assert httpx.get(f"{token_url}/web/static/app.js").status_code == 200
    for path in (
        "/web/api/info",
        "/web/api/tasks",
        "/web/api/live",
        "/web/api/trajectories",
        "/web/curriculum",
        "/web/curriculum.html",
        f"/web/api/tasks/{starter_task('csv').id}",
    ):
        assert httpx.get(f"{token_url}{path}").status_code == 401, path
        assert httpx.get(f"{token_url}{path}?token=wrong").status_code == 401, path
        assert (
            httpx.get(
                f"{token_url}{path}", headers={"Authorization": f"Bearer {TOKEN}"}
            ).status_code
            == 200
        ), path
    # A traversal through the open static prefix reaches no data route (sent raw, unnormalised).
    parts = urlsplit(token_url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    conn.request("GET", "/web/static/../api/info")
    response = conn.getresponse()
    assert response.status in (400, 401, 404) and b"task_count" not in response.read()
    conn.close()
    live = token_url.replace("http://", "ws://") + "/web/api/live/ws"
    with pytest.raises(websockets.exceptions.InvalidStatus):
        with ws_client.connect(live):
            pass
    with ws_client.connect(f"{live}?token={TOKEN}") as ws:
        assert json.loads(ws.recv(timeout=10))["type"] == "sessions"


def test_page_asks_for_the_token_and_refuses_a_wrong_one(browser, token_url):
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(f"{token_url}/web#/tasks")
        dialog = page.locator("#token-dialog")
        expect(dialog).to_be_visible()
        expect(page.locator("#task-table")).to_have_count(0)

        page.fill("#token-input", "wrong-token")
        page.click("#token-submit")
        expect(dialog).to_be_visible()
        expect(page.locator("#token-error")).to_be_visible()

        page.fill("#token-input", TOKEN)
        page.click("#token-submit")
        expect(dialog).to_be_hidden()
        expect(page.locator("#task-table tbody tr[data-task]").first).to_be_visible()
        assert page.evaluate("sessionStorage.getItem('analyst_env_token')") == TOKEN

        # The stored token also opens the episode socket (?token= on /ws).
        task = starter_task("csv")
        open_web(page, token_url, f"#/play/{task.id}")
        expect(page.locator("#episode-status")).to_contain_text("ready")
        run_in_editor(page, "6 * 7")
        wait_for_cells(page, 1)
        expect(page.locator("#notebook .cell .cell-out")).to_contain_text("42")
    finally:
        context.close()


def test_token_in_the_page_address_is_stored_and_removed_from_it(browser, token_url):
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(f"{token_url}/web?token={TOKEN}#/live")
        page.wait_for_selector("body[data-ready='1']")
        expect(page.locator("#live-table")).to_be_visible()
        expect(page.locator("#token-dialog")).to_be_hidden()
        assert "token" not in page.url
    finally:
        context.close()
