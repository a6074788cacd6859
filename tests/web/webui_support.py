"""What the /web browser tests and the screenshot script share: a real server and a real Chromium.

The server is the real app (``build_app``) serving the shipped ``starter`` set
on a loopback port; the browser is Debian's ``/usr/bin/chromium`` driven by
Playwright (never a downloaded browser). The flags keep Chromium from calling
out to the network, which a closed machine would refuse anyway.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

CHROMIUM = os.environ.get("ANALYST_ENV_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]

# The repo root is the package; keep it off sys.path (its datasets/ would shadow PyPI's).
_ROOT = str(Path(__file__).resolve().parents[2])
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _ROOT]

from analyst_env.datasets import load_dataset  # noqa: E402
from analyst_env.server.app import build_app  # noqa: E402
from analyst_env.server.local_server import BackgroundServer  # noqa: E402
from analyst_env.server.settings import Settings  # noqa: E402


@contextlib.contextmanager
def starter_server(state_dir: str | Path, token: str | None = None) -> Iterator[str]:
    """A real server with the starter set, recording trajectories under ``state_dir``."""
    settings = Settings(
        dataset="starter",
        state_dir=str(state_dir),
        token=token,
        allow_builds=True,  # the environment cards test creates one
        standbys=1,
        cell_timeout_s=60.0,
        max_sessions=16,
    )
    with BackgroundServer(build_app(settings), startup_timeout_s=120) as url:
        yield url


@contextlib.contextmanager
def chromium() -> Iterator[object]:
    """A headless Chromium browser (Playwright ``Browser``)."""
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        raise RuntimeError(
            f"{CHROMIUM} is missing: install Debian's chromium package (.ci/run does)"
        )
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


def starter_task(kind: str, template_prefix: str = "", verifier: str | None = None):
    """A starter task of ``kind`` ('csv', 'sqlite', 'excel'), with its gold answer (test side
    only)."""
    for task in load_dataset("starter").tasks:
        if (
            task.metadata.get("kind") == kind
            and task.metadata.get("template", "").startswith(template_prefix)
            and (verifier is None or task.verifier.name == verifier)
        ):
            return task
    raise LookupError(f"no starter task of kind {kind!r}")


def open_web(page, url: str, hash_: str = "#/tasks") -> float:
    """Open the page and wait until its first view is drawn; the seconds that took."""
    started = time.perf_counter()
    page.goto(f"{url}/web{hash_}")
    page.wait_for_selector("body[data-ready='1']")
    return time.perf_counter() - started


def run_in_editor(page, text: str, mode: str = "python") -> None:
    """Type ``text`` into the composer in ``mode`` and run it with Shift+Enter."""
    page.click(f"#composer .tab[data-mode='{mode}']")
    editor = page.locator("#composer textarea")
    editor.fill(text)
    editor.press("Shift+Enter")


def wait_for_cells(page, count: int, selector: str = "#notebook") -> None:
    """Wait until ``count`` finished cells are in the notebook."""
    page.wait_for_function(
        "([sel, n]) => document.querySelectorAll(sel + ' > .cell:not(.running)').length >= n"
        " && !document.querySelector(sel + ' > .cell.running')",
        arg=[selector, count],
        timeout=90_000,
    )


PLOT_CODE = (
    "import pandas as pd\nimport matplotlib.pyplot as plt\ndf = pd.read_csv('{file}')\ndf.head()\n"
)
PLOT_CELL = (
    "fig, ax = plt.subplots(figsize=(6, 2.6))\n"
    "df.groupby('region')['revenue'].sum().sort_values().plot.barh(ax=ax, color='#2f6fed')\n"
    "ax.set_title('Revenue by region')\n"
    "ax.set_xlabel('revenue')\n"
    "plt.tight_layout()\n"
    "plt.show()"
)
SQL_QUERY = (
    "SELECT region, ROUND(SUM(revenue), 2) AS revenue, COUNT(*) AS orders FROM sales GROUP BY "
    "region ORDER BY 2 DESC"
)
