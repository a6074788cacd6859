"""Fixtures of the /web tests: one real starter server and one real headless Chromium per
session."""

from __future__ import annotations

import os
import sys

import pytest
from playwright.sync_api import expect

# A busy CI machine can take seconds to start a sandbox; a wrong page never turns right by waiting.
expect.set_options(timeout=30_000)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from webui_support import CHROMIUM, chromium, starter_server  # noqa: E402


@pytest.fixture(scope="session")
def web_state_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("web-state")


@pytest.fixture(scope="session")
def web_url(web_state_dir):
    with starter_server(web_state_dir) as url:
        yield url


@pytest.fixture(scope="session")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing: apt-get install chromium (.ci/run does)")
    with chromium() as b:
        yield b


def _refused_by_policy(text: str) -> list[str]:
    if "Content Security Policy" not in text or "inline event handler" in text:
        return []
    return [text]


@pytest.fixture
def page(browser):
    """A fresh browser context; any uncaught JavaScript error, and anything the page's
    Content-Security-Policy refuses, fails the test. Chromium also reports the inline event
    handlers of agent HTML the sanitizer parses (``render.js``; none runs, none is kept):
    those are expected, since the page itself has none."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(60_000)
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.on("console", lambda message: errors.extend(_refused_by_policy(message.text)))
    yield pg
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"
