"""/web with a dataset made on demand: paged browsing, filters, a task opened by index (API and
browser)."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect
from webui_support import open_web

from analyst_env.server.app import build_app
from analyst_env.server.local_server import BackgroundServer
from analyst_env.server.settings import Settings

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def procedural_url(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ANALYST_ENV_CACHE", str(tmp_path_factory.mktemp("cache")))
        app = build_app(
            Settings(
                dataset="procedural:99",
                max_sessions=4,
                state_dir=str(tmp_path_factory.mktemp("state")),
            )
        )
        with BackgroundServer(app, startup_timeout_s=120) as url:
            yield url


def test_browse_pages_filters_and_refuses_bad_requests(procedural_url):
    with httpx.Client(base_url=procedural_url, timeout=120) as http:
        info = http.get("/web/api/info").json()
        (u,) = info["unbounded"]
        assert u["name"] == "procedural" and u["splits"]["train"] == 2**40
        first = http.get("/web/api/browse", params={"dataset": "procedural", "limit": 5}).json()
        assert [t["id"] for t in first["tasks"]] == [f"procedural-train-{i}" for i in range(5)]
        assert "answer" not in first["tasks"][0] and first["next_start"] == 5
        nxt = http.get(
            "/web/api/browse",
            params={"dataset": "procedural", "limit": 5, "start": first["next_start"]},
        ).json()
        assert nxt["tasks"][0]["id"] == "procedural-train-5"
        joins = http.get(
            "/web/api/browse",
            params={
                "dataset": "procedural",
                "split": "ood",
                "limit": 4,
                "category": "joins",
                "level": "hard",
            },
        ).json()
        assert joins["tasks"] and all(
            t["category"] == "joins" and t["level"] == "hard" for t in joins["tasks"]
        )
        assert all(t["split"] == "ood" for t in joins["tasks"])
        one = http.get("/web/api/tasks/procedural-test-987654321").json()
        assert one["id"] == "procedural-test-987654321" and "answer" not in one and one["files"]
        assert http.get("/web/api/browse", params={"dataset": "nope"}).status_code == 404
        assert (
            http.get(
                "/web/api/browse", params={"dataset": "procedural", "split": "dev"}
            ).status_code
            == 404
        )
        assert (
            http.get(
                "/web/api/browse", params={"dataset": "procedural", "start": 2**40}
            ).status_code
            == 400
        )
        assert (
            http.get("/web/api/browse", params={"dataset": "procedural", "limit": 500}).status_code
            == 422
        )
        assert http.get("/web/api/tasks/procedural-train-x").status_code == 404
        assert http.get("/health").status_code == 200


def test_page_browses_filters_and_opens_by_index(page, procedural_url):
    open_web(page, procedural_url)
    rows = page.locator("#browse-table-procedural tbody tr[data-task]")
    expect(rows.first).to_be_visible()
    expect(rows).to_have_count(25)
    page.click("#browse-more-procedural")
    expect(rows).to_have_count(50)
    page.select_option("#browse-procedural select[data-browse='kind']", "sqlite")
    expect(rows.first).to_be_visible()
    assert page.locator("#browse-table-procedural tbody .kind-csv").count() == 0
    page.fill("#browse-index-procedural", "424242")
    page.click("#browse-open-procedural")
    expect(page.locator("h1.mono")).to_have_text("procedural-train-424242")
    expect(page.locator("#file-preview table").first).to_be_visible()
