"""End-to-end tests of /web in real headless Chromium against a real server with the starter set.

Each test drives the page the way a person would (clicks, typing, Shift+Enter)
and checks what the page then shows: tables, plots, errors, rewards, sessions
appearing live. Page load time is measured and printed, not asserted.
"""

from __future__ import annotations

import re
import time
import uuid

import httpx
import pytest
from playwright.sync_api import expect
from webui_support import (
    PLOT_CELL,
    PLOT_CODE,
    SQL_QUERY,
    open_web,
    run_in_editor,
    starter_server,
    starter_task,
    wait_for_cells,
)

from analyst_env.client import AnalystEnv

pytestmark = pytest.mark.live


def test_page_loads_fast_and_fetches_nothing_from_elsewhere(page, web_url, capsys):
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    open_web(page, web_url)  # warm: the first request also pays for the server's first task listing
    page.goto("about:blank")
    requests.clear()
    seconds = open_web(page, web_url)
    timing = page.evaluate(
        "(() => { const n = performance.getEntriesByType('navigation')[0];"
        " return {dom: n.domContentLoadedEventEnd, load: n.loadEventEnd, ready: "
        "Number(document.body.dataset.readyMs)}; })()"
    )
    with capsys.disabled():
        print(
            f"\n/web load on loopback: task list drawn {timing['ready']:.0f} ms after "
            "navigation start "
            f"(DOMContentLoaded {timing['dom']:.0f} ms, load {timing['load']:.0f} ms; "
            f"{seconds * 1000:.0f} ms as the test driver saw it)"
        )
    expect(page.locator("#task-table tbody tr").first).to_be_visible()
    assert requests, "the page made no requests at all"
    foreign = [u for u in requests if not u.startswith(web_url) and not u.startswith("data:")]
    assert not foreign, f"the page fetched from elsewhere: {foreign}"
    assert not any("gradio" in u for u in requests)


def test_task_browser_search_filter_and_file_previews(page, web_url):
    open_web(page, web_url)
    rows = page.locator("#task-table tbody tr[data-task]")
    total = rows.count()
    page.select_option("select[data-filter='kind']", "sqlite")
    expect(page.locator("#task-table tbody tr[data-task] .kind-sqlite").first).to_be_visible()
    assert page.locator("#task-table tbody tr[data-task] .kind-csv").count() == 0
    assert 0 < rows.count() < total

    page.fill("#task-search", "no task says this 1f2e3d")
    expect(page.locator("#task-table")).to_contain_text("No task matches these filters")
    page.fill("#task-search", "")

    sqlite_task = starter_task("sqlite")
    page.fill("#task-search", sqlite_task.id)
    page.click(f"#task-table tr[data-task='{sqlite_task.id}']")
    expect(page.locator(".instruction")).to_contain_text(sqlite_task.instruction.split("\n")[0])
    preview = page.locator("#file-preview")
    expect(preview).to_contain_text("CREATE TABLE")  # the schema
    expect(preview.locator("table.data").first).to_be_visible()  # the first rows
    assert preview.locator("table.data tbody tr").count() > 1

    excel_task = starter_task("excel")
    open_web(page, web_url, f"#/task/{excel_task.id}")
    expect(page.locator("#file-preview")).to_contain_text("Sheet")
    expect(page.locator("#file-preview table.data").first).to_be_visible()


def test_play_episode_plot_sql_and_reward_breakdown(page, web_url):
    """The issue's first scenario: pick a task, plot, SQL, submit, see the reward and its
    breakdown."""
    task = starter_task(
        "csv", "sales_", verifier="dabench"
    )  # two-part answer: the breakdown has parts
    open_web(page, web_url)
    page.fill("#task-search", task.id)
    page.click(f"#task-table tr[data-task='{task.id}']")
    page.click("#play-button")
    expect(page.locator("#episode-status")).to_contain_text("ready")
    expect(page.locator("#episode-id")).to_have_text(re.compile(r"^web-[0-9a-f]+$"))

    run_in_editor(page, PLOT_CODE.format(file="sales.csv"))
    wait_for_cells(page, 1)
    expect(
        page.locator("#notebook .cell").nth(0).locator(".html-output table")
    ).to_be_visible()  # df.head() as HTML

    run_in_editor(page, PLOT_CELL)
    wait_for_cells(page, 2)
    plot = page.locator("#notebook .cell").nth(1).locator("img.plot")
    expect(plot).to_be_visible()
    assert plot.evaluate(
        "img => img.complete && img.naturalWidth > 100 && "
        "img.src.startsWith('data:image/png;base64,')"
    )

    run_in_editor(page, SQL_QUERY, "sql")
    wait_for_cells(page, 3)
    sql_cell = page.locator("#notebook .cell").nth(2)
    expect(sql_cell.locator("table.data thead")).to_contain_text("revenue")
    assert sql_cell.locator("table.data tbody tr").count() == 5  # five regions

    # One part right, one wrong: DABench scores all-or-nothing, and the breakdown shows which part
    # failed.
    parts = re.findall(r"@(\w+)\[([^\]]*)\]", task.oracle_answer)
    assert len(parts) == 2
    answer = f"@{parts[0][0]}[{parts[0][1]}] @{parts[1][0]}[999999]"
    run_in_editor(page, answer, "answer")
    wait_for_cells(page, 4)
    reward = page.locator("#notebook .reward")
    expect(reward).to_have_attribute("data-reward", "0")
    breakdown = reward.locator("table.breakdown tr")
    expect(breakdown.filter(has_text=f"part:{parts[0][0]}")).to_contain_text("1.000")
    expect(breakdown.filter(has_text=f"part:{parts[1][0]}")).to_contain_text("0.000")
    expect(reward).to_contain_text("1/2 parts correct")
    expect(page.locator("#episode-status")).to_contain_text("done")
    expect(page.locator("#composer")).to_be_hidden()


def test_errors_show_as_the_agent_sees_them(page, web_url):
    task = starter_task("csv")
    open_web(page, web_url, f"#/play/{task.id}")
    expect(page.locator("#episode-status")).to_contain_text("ready")
    run_in_editor(page, "def broken(:\n    pass")
    wait_for_cells(page, 1)
    cell = page.locator("#notebook .cell").nth(0)
    expect(cell).to_have_class(re.compile("cell-error"))
    expect(cell.locator("pre.err")).to_contain_text("SyntaxError")

    run_in_editor(page, "SELEC nonsense FROM nowhere", "sql")
    wait_for_cells(page, 2)
    expect(page.locator("#notebook .cell").nth(1).locator("pre.err")).to_contain_text("SQL error")

    run_in_editor(page, "1 + 1")  # the session still works after both errors
    wait_for_cells(page, 3)
    expect(page.locator("#notebook .cell").nth(2).locator(".cell-out")).to_contain_text("2")

    # Step 4 is the kernel's third cell: the page names it as the traceback does.
    run_in_editor(page, "1 / 0")
    wait_for_cells(page, 4)
    fourth = page.locator("#notebook .cell").nth(3)
    expect(fourth.locator(".prompt")).to_have_text("[4]")
    expect(fourth.locator(".exec-count")).to_have_text("In [3]")
    expect(fourth.locator("pre.err")).to_contain_text("Cell In[3]")


def test_html_from_agent_code_cannot_run_script(page, web_url):
    """Cell HTML is untrusted: tables render, scripts and handlers never run."""
    task = starter_task("csv")
    open_web(page, web_url, f"#/play/{task.id}")
    expect(page.locator("#episode-status")).to_contain_text("ready")
    run_in_editor(
        page,
        (
            "from IPython.display import HTML, display\n"
            "display(HTML('<img src=x onerror=\"window.__xss=1\"><script>window.__xss=2</script>'\n"
            '             \'<table><tr><td onclick="window.__xss=3" colspan="2">kept '
            "text</td></tr></table>'\n"
            '             \'<a href="javascript:window.__xss=4">link '
            "text</a><style>body{display:none}</style>'))"
        ),
    )
    wait_for_cells(page, 1)
    output = page.locator("#notebook .cell .html-output")
    expect(output.locator("td")).to_have_text("kept text")
    expect(output).to_contain_text("link text")
    assert output.locator("td").get_attribute("colspan") == "2"
    output.locator("td").click()
    output.get_by_text("link text").click()
    assert page.evaluate("window.__xss") is None
    assert output.locator("script, img, a, style, [onclick], [onerror]").count() == 0
    expect(page.locator("#notebook")).to_be_visible()


def test_unknown_task_shows_a_clear_error(page, web_url):
    open_web(page, web_url, "#/play/starter-no-such-task")
    expect(page.locator(".error-box")).to_contain_text("Could not start the episode")
    expect(page.locator(".error-box")).to_contain_text("unknown task_id")
    open_web(page, web_url, "#/task/starter-no-such-task")
    expect(page.locator(".error-box")).to_contain_text("unknown task_id")
    open_web(page, web_url, "#/live/s999999")
    expect(page.locator(".error-box")).to_contain_text("no live session")
    open_web(page, web_url, "#/replay/nope.jsonl")
    expect(page.locator(".error-box")).to_contain_text("no recorded episode")
    assert httpx.get(f"{web_url}/health").json()["status"] == "healthy"


def test_browser_watches_a_script_client_live(page, web_url):
    """The issue's second scenario: a client runs an episode over /ws while the page watches it."""
    task = starter_task("sqlite")
    episode_id = f"trainer-{uuid.uuid4().hex[:12]}"
    open_web(page, web_url, "#/live")
    with AnalystEnv(base_url=web_url).sync() as env:
        env.reset(task_id=task.id, episode_id=episode_id)
        row = page.locator(f"#live-table tr[data-episode='{episode_id}']")
        expect(row).to_contain_text("running")
        expect(row).to_contain_text("client")
        row.click()
        expect(page.locator(".session-head")).to_contain_text(task.id)

        env.add_and_execute_code_cell("print('hello from the trainer')")
        expect(page.locator("#live-notebook .cell")).to_have_count(1)
        expect(page.locator("#live-notebook .cell").nth(0)).to_contain_text(
            "hello from the trainer"
        )

        env.add_and_execute_code_cell(
            "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()"
        )
        expect(page.locator("#live-notebook .cell").nth(1).locator("img.plot")).to_be_visible()

        env.run_sql("SELECT COUNT(*) AS n FROM orders")
        expect(page.locator("#live-notebook .cell").nth(2).locator("table.data")).to_contain_text(
            "n"
        )

        result = env.final_answer(task.oracle_answer)
        assert result.reward == 1.0
        expect(page.locator("#live-notebook .reward")).to_have_attribute("data-reward", "1")

        # The same connection starts another episode: the watcher follows it.
        next_task, next_id = starter_task("csv"), f"trainer-{uuid.uuid4().hex[:12]}"
        env.reset(task_id=next_task.id, episode_id=next_id)
        expect(page.locator("#live-notebook")).to_contain_text(f"new episode {next_id}")
        expect(page.locator(".session-head")).to_contain_text(next_task.id)
        env.add_and_execute_code_cell("print('second episode')")
        expect(page.locator("#live-notebook .cell").last).to_contain_text("second episode")
        expect(page.locator("#live-notebook .cell").last.locator(".prompt")).to_have_text("[1]")
    expect(page.locator("#live-notebook")).to_contain_text("the client left this episode")


def test_replay_steps_through_a_recorded_episode(page, web_url):
    task = starter_task("csv", "sales_")
    episode_id = f"replay-{uuid.uuid4().hex[:12]}"
    with AnalystEnv(base_url=web_url).sync() as env:
        env.reset(task_id=task.id, episode_id=episode_id)
        env.add_and_execute_code_cell("x = 40 + 2\nprint(x)")
        env.execute_shell_command("ls")
        env.final_answer("0")
    open_web(page, web_url, "#/replay")
    page.fill("#replay-search", episode_id)
    row = page.locator("#replay-table tr[data-name]")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("0.000")
    # A wrong answer is a red "failed", not a green "ended"; the outcome filter finds it.
    expect(row.locator(".badge.outcome-failed")).to_have_text("failed")
    page.select_option("#replay-outcome", "solved")
    expect(row).to_have_count(0)
    expect(page.locator("#replay-table")).to_contain_text("No recorded episode matches")
    page.select_option("#replay-outcome", "failed")
    expect(row).to_have_count(1)
    expect(page.locator("#replay-note")).to_have_text("1–1 of 1 episode(s)")
    expect(page.locator("#replay-older")).to_be_disabled()
    row.click()
    notebook = page.locator("#replay-notebook .cell")
    expect(notebook).to_have_count(3)
    expect(page.locator("#replay-pos")).to_have_text("3 / 3")
    page.click("#replay-prev")
    page.click("#replay-prev")
    expect(notebook).to_have_count(1)
    expect(notebook.nth(0)).to_contain_text("42")
    page.click("#replay-next")
    expect(notebook).to_have_count(2)
    page.locator("ol.timeline li[data-step='2']").click()
    expect(notebook).to_have_count(3)
    expect(page.locator("#replay-notebook .reward")).to_have_attribute("data-reward", "0")
    # The zero says why: what the scorer read from the answer and which rule it failed.
    expect(page.locator("#replay-notebook .reward-detail")).to_contain_text("read 0")
    expect(page.locator("ol.timeline li")).to_have_count(3)
    expect(page.locator("ol.timeline li").nth(0)).to_contain_text(re.compile(r"\d+ ms|\d+\.\d+ s"))


def test_an_empty_environments_page_says_how_to_make_one(page, tmp_path):
    with starter_server(tmp_path / "state") as url:
        assert httpx.get(f"{url}/envs").json()["environments"] == []
        open_web(page, url, "#/envs")
        expect(page.locator("#envs-empty")).to_contain_text("analyst-env envs create NAME")


def test_environment_cards_follow_the_envs_route(page, web_url):
    listing = httpx.get(f"{web_url}/envs")
    if listing.status_code == 404:  # a server without sandbox environments
        open_web(page, web_url, "#/envs")
        expect(page.locator("#env-cards")).to_contain_text("No sandbox environments on this server")
        return
    name = f"web-card-{uuid.uuid4().hex[:6]}"
    created = httpx.post(
        f"{web_url}/envs", json={"name": name, "description": "An empty recipe for the card test."}
    )
    assert created.status_code == 201, created.text
    open_web(page, web_url, "#/envs")
    card = page.locator(f"#env-cards [data-env='{name}']")
    expect(card).to_contain_text("An empty recipe for the card test.")
    # The page polls while the build runs, so the card reaches the same final status as the API.
    deadline = time.monotonic() + 120
    while (status := httpx.get(f"{web_url}/envs/{name}").json()["status"]) in (
        "pending",
        "building",
    ):
        assert time.monotonic() < deadline, "the build did not finish"
        time.sleep(0.5)
    expect(card.locator(".badge")).to_have_text(status, timeout=10_000)
    if status == "failed":
        expect(card.locator("pre.err")).to_be_visible()
    httpx.delete(f"{web_url}/envs/{name}")


def test_two_tabs_get_their_own_sessions(browser, web_url):
    task = starter_task("csv")
    context = browser.new_context()
    try:
        first, second = context.new_page(), context.new_page()
        for pg in (first, second):
            open_web(pg, web_url, f"#/play/{task.id}")
            expect(pg.locator("#episode-status")).to_contain_text("ready")
        run_in_editor(first, "shared = 'only in the first tab'\nshared")
        wait_for_cells(first, 1)
        run_in_editor(second, "'shared' in globals()")
        wait_for_cells(second, 1)
        expect(second.locator("#notebook .cell").nth(0).locator(".cell-out")).to_contain_text(
            "False"
        )
        assert (
            first.locator("#episode-id").inner_text() != second.locator("#episode-id").inner_text()
        )
    finally:
        context.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # closing the tabs closed their sessions
        sessions = httpx.get(f"{web_url}/web/api/live").json()["sessions"]
        if not any(s["origin"] == "web" and not s["closed"] for s in sessions):
            break
        time.sleep(0.2)
    else:
        pytest.fail("browser sessions stayed open after their tabs closed")
