"""The generator's snapshot of the text every episode shows is that text.

``datasets/`` cannot import the server, so the procedural generator reads the reset
message, tool catalogue and prompts from a snapshot. When a tool's docstring or a
prompt changes, this test fails; ``ANALYST_ENV_UPDATE_SNAPSHOTS=1`` rewrites the
snapshot (which may change which tasks a seed makes: review the diff).
"""

from __future__ import annotations

import os
from pathlib import Path

from analyst_env.datasets.procedural import answer_leaks
from analyst_env.server.shown_text import shown_to_every_episode

SNAPSHOT = Path(answer_leaks.__file__).with_name("shown_text.txt")


def test_the_snapshot_is_what_every_episode_shows():
    live = shown_to_every_episode()
    if os.environ.get("ANALYST_ENV_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(live + "\n", encoding="utf-8")
        answer_leaks.shared_text.cache_clear()
    assert answer_leaks.shared_text() == live, (
        "a tool, the reset message or a prompt changed: rerun with "
        "ANALYST_ENV_UPDATE_SNAPSHOTS=1 to update datasets/procedural/shown_text.txt"
    )


def test_words_of_the_tools_are_in_the_snapshot():
    # The names the model reads in every episode are what a label must never be.
    text = answer_leaks.shared_text()
    for word in ("final_answer", "run_sql", "Environment ready"):
        assert word in text
    assert answer_leaks.in_shared_text("Environment") and not answer_leaks.in_shared_text(
        "Zanzibar"
    )
