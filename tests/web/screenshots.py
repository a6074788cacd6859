"""Screenshots of the /web debugging UI for the README: ``python tests/web/screenshots.py
[OUT_DIR]``.

Starts a real server with the starter set, plays an episode in Chromium (a
table, a plot, SQL, an answer), has a script client run an episode over /ws
while a second page watches it live, and saves the main pages as PNGs
(default ``docs/screenshots/``).
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from webui_support import (  # noqa: E402
    PLOT_CELL,
    PLOT_CODE,
    SQL_QUERY,
    chromium,
    open_web,
    run_in_editor,
    starter_server,
    starter_task,
    wait_for_cells,
)

VIEWPORT = {"width": 1280, "height": 820}
PHONE = {"width": 390, "height": 780}
PAGES = (
    "tasks",
    "task-preview",
    "episode",
    "live-session",
    "replay-list",
    "replay",
    "environments",
    "runs",
    "run",
    "runs-compare",
    "phone-runs",
    "phone-replay",
)
overflow: dict[str, int] = {}  # phone page -> pixels the page is wider than the screen


def shrink(path: Path) -> None:
    """Re-save as a 256-colour PNG: a UI has few colours, and the file gets ~3x smaller."""
    from PIL import Image

    with Image.open(path) as im:
        small = im.convert("RGB").quantize(
            colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE
        )
    small.save(path, optimize=True)


def take(out: Path, browser: Any = None) -> list[Path]:
    """Shoot every page in ``PAGES`` into ``out``; ``browser`` is a running Playwright browser
    (a test session's: Playwright's sync API runs one at a time), else Chromium is started."""
    out.mkdir(parents=True, exist_ok=True)
    saved: list[Path] = []
    csv_task = starter_task(
        "csv", "sales_", verifier="dabench"
    )  # a multi-part answer: a reward breakdown
    sql_task = starter_task("sqlite")
    with (
        tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as state,
        starter_server(state) as url,
        contextlib.nullcontext(browser) if browser is not None else chromium() as browser,
    ):
        page = browser.new_page(viewport=VIEWPORT)
        page.set_default_timeout(60_000)  # a loaded 2-core machine starts kernels slowly

        def shot(name: str, height: int | None = None) -> None:
            """Save the viewport (``height`` px tall when given, from the top of the page)."""
            path = out / f"{name}.png"
            if height:
                page.set_viewport_size({**VIEWPORT, "height": height})
                page.evaluate("window.scrollTo(0, 0)")
            page.screenshot(path=str(path))
            page.set_viewport_size(VIEWPORT)
            shrink(path)
            saved.append(path)

        open_web(page, url)
        page.fill("#task-search", "revenue")
        page.wait_for_timeout(200)
        shot("tasks")

        open_web(page, url, f"#/task/{sql_task.id}")
        page.wait_for_selector("#file-preview table.data")
        shot("task-preview")

        open_web(page, url, f"#/play/{csv_task.id}")
        page.wait_for_selector("#episode-status.ok")
        run_in_editor(page, PLOT_CODE.format(file=sorted(csv_task.files)[0]))
        wait_for_cells(page, 1)
        run_in_editor(page, PLOT_CELL)
        wait_for_cells(page, 2)
        run_in_editor(page, SQL_QUERY, "sql")
        wait_for_cells(page, 3)
        run_in_editor(page, csv_task.oracle_answer or str(csv_task.answer), "answer")
        wait_for_cells(page, 4)
        page.wait_for_selector(".reward")
        shot("episode", height=int(page.evaluate("document.body.scrollHeight")))

        # A script client runs an episode over /ws; a page watches it live.
        from analyst_env.client import AnalystEnv

        ready, finished = threading.Event(), threading.Event()

        def client() -> None:
            with AnalystEnv(base_url=url).sync() as env:
                env.reset(task_id=sql_task.id)
                ready.wait(60)
                env.execute_shell_command("ls -la")
                env.run_sql("SELECT name FROM sqlite_master WHERE type = 'table'")
                env.add_and_execute_code_cell(
                    "import sqlite3, pandas as pd\n"
                    f"con = sqlite3.connect('{sorted(sql_task.files)[0]}')\n"
                    "pd.read_sql('SELECT status, COUNT(*) AS orders FROM orders GROUP BY "
                    "status', con)"
                )
                env.final_answer(sql_task.oracle_answer or str(sql_task.answer))
                finished.set()
                time.sleep(5)

        thread = threading.Thread(target=client, daemon=True)
        thread.start()
        open_web(page, url, "#/live")
        page.wait_for_selector("#live-table tr[data-session]")
        page.click("#live-table tr[data-session]")
        page.wait_for_selector(".session-head h2")
        ready.set()
        finished.wait(120)
        page.wait_for_selector("#live-notebook .reward")
        shot("live-session")
        thread.join(30)

        open_web(page, url, "#/replay")
        page.wait_for_selector("#replay-table tr[data-name]")
        shot("replay-list")
        page.locator("#replay-table tr[data-name]").last.click()
        page.wait_for_selector("#replay-notebook .cell")
        page.click("#replay-prev")
        page.click("#replay-prev")
        shot("replay")

        import httpx

        if httpx.get(f"{url}/envs").status_code == 200:
            httpx.post(f"{url}/envs", json={"template": "data-science", "name": "data-science"})
            httpx.post(
                f"{url}/envs",
                json={
                    "name": "minimal",
                    "description": "The server's own packages, nothing added.",
                },
            )
        open_web(page, url, "#/envs")
        page.wait_for_timeout(1500)
        shot("environments")

        play_runs(url, state, [csv_task, sql_task])
        open_web(page, url, "#/runs")
        page.wait_for_selector("#runs-table tr[data-run]")
        shot("runs")
        open_web(page, url, "#/runs/screenshot-null")
        page.wait_for_selector("#run-tasks tbody tr")
        shot("run", height=int(page.evaluate("document.body.scrollHeight")))
        open_web(page, url, "#/runs-compare/screenshot-oracle/screenshot-null")
        page.wait_for_selector("#compare-table tbody tr")
        shot("runs-compare")
        # The same pages on a phone: nothing wider than the screen but scrollable tables.
        page.set_viewport_size(PHONE)
        for route, name in (("#/runs", "phone-runs"), ("#/replay", "phone-replay")):
            open_web(page, url, route)
            page.wait_for_selector("table.list tbody tr")
            path = out / f"{name}.png"
            page.screenshot(path=str(path))
            shrink(path)
            saved.append(path)
            overflow[name] = page.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
    return saved


def play_runs(url: str, state: str, tasks: list, prefix: str = "screenshot") -> None:
    """Two eval runs, ``PREFIX-oracle`` and ``PREFIX-null``, into the server's runs directory."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from analyst_env.evaluation.run import EvalSettings, run_eval
    from analyst_env.run_records.run_log import runs_dir

    for policy in ("oracle", "null"):
        settings = EvalSettings(
            dataset="starter",
            policy=policy,
            run_name=f"{prefix}-{policy}",
            runs_dir=str(runs_dir(state)),
            fresh=True,
        )
        # Playwright's sync API keeps an event loop running on this thread: play on another.
        with ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, run_eval(settings, tasks, url)).result()


if __name__ == "__main__":
    target = (
        Path(sys.argv[1])
        if len(sys.argv) > 1
        else Path(__file__).resolve().parents[2] / "docs" / "screenshots"
    )
    for p in take(target):
        print(p, p.stat().st_size)
