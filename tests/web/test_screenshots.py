"""The README's screenshots are the pages as they are: every page is shot by real Chromium,
and the phone-sized pages fit the screen."""

from __future__ import annotations

from pathlib import Path

import pytest
import screenshots

pytestmark = pytest.mark.live
DOCS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


@pytest.fixture(scope="module")
def shots(browser, tmp_path_factory):
    return screenshots.take(tmp_path_factory.mktemp("shots"), browser)


def test_every_page_is_shot_and_is_a_picture(shots):
    assert [p.stem for p in shots] == list(screenshots.PAGES)
    for path in shots:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 4000


def test_pages_on_a_phone_are_no_wider_than_the_screen(shots):
    assert screenshots.overflow and all(px <= 0 for px in screenshots.overflow.values()), (
        screenshots.overflow
    )


def test_the_committed_screenshots_are_the_pages_shot():
    assert sorted(p.stem for p in DOCS.glob("*.png")) == sorted(screenshots.PAGES)
