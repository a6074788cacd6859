"""The /web Runs page in real headless Chromium: eval runs listed, compared, opened, replayed.

Two runs are played against the real starter server with ``run_eval`` (the
``oracle`` and ``null`` policies of the eval loop, a few tasks each) into the
server's own state directory, then the page is driven as a person would.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from screenshots import play_runs
from webui_support import open_web

from analyst_env.datasets import load_dataset

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def runs(web_url, web_state_dir):
    tasks = [t for t in load_dataset("starter").tasks if not t.oracle_steps][:3]
    play_runs(web_url, str(web_state_dir), tasks, prefix="browser")
    return tasks


def test_runs_are_compared_task_by_task(page, web_url, runs):
    open_web(page, web_url, "#/runs")
    table = page.locator("#runs-table")
    expect(table.locator("tr[data-run='browser-oracle']")).to_contain_text("1.000")
    expect(table.locator("tr[data-run='browser-null']")).to_contain_text("0.000")
    expect(page.locator("#runs-compare")).to_be_disabled()
    page.check("input[data-run='browser-oracle']")
    page.check("input[data-run='browser-null']")
    page.click("#runs-compare")
    rows = page.locator("#compare-table tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.first).to_contain_text("-1.000")
    # Read from B's side: the null run (B) is worse than the oracle (A) on every task, in red,
    # and the tasks are in task order.
    expect(page.locator("#compare-counts")).to_contain_text("B worse: 3")
    expect(rows.first.locator(".badge.bad")).to_have_text("B worse")
    ids = [rows.nth(i).get_attribute("data-task") for i in range(3)]
    assert ids == sorted(t.id for t in runs)
    page.check("#compare-only-diff")
    expect(rows).to_have_count(3)


def test_a_run_page_says_why_episodes_failed_or_that_none_did(page, web_url, runs):
    open_web(page, web_url, "#/runs/browser-oracle")
    expect(page.locator("#run-failures")).to_have_text("No failures: every episode was solved.")
    open_web(page, web_url, "#/runs/browser-null")
    expect(page.locator("#run-failures tbody tr").first).to_be_visible()
    expect(page.locator("#run-failures thead")).to_contain_text("Why episodes failed")


def test_a_run_opens_its_report_and_replays_an_episode(page, web_url, runs):
    open_web(page, web_url, "#/runs/browser-oracle")
    expect(page.locator("#run-headline")).to_contain_text("pass@1 1.000")
    expect(page.locator("#run-tasks tbody tr")).to_have_count(3)
    page.locator(f"#run-tasks tr[data-task='{runs[0].id}'] a.replay-link").click()
    expect(page.locator("h1")).to_have_text("Recorded episode")
    expect(page.locator(".side h2")).to_have_text(runs[0].id)

    open_web(page, web_url, "#/runs/browser-oracle")
    page.click("#run-show-report")
    frame = page.frame_locator("#run-report iframe")
    expect(frame.locator("h1")).to_contain_text("oracle on starter")
    expect(frame.locator("img").first).to_be_visible()
    assert page.locator("#run-report iframe").get_attribute("sandbox") == ""
