"""Whether an answer is already shown to the agent, by the file previews or by every episode.

A task whose numeric answer appears in the previews the reset shows, or whose
label answer is a word of what every episode shows (the reset message, the
tools, the prompts), can be answered without the analysis, so the generator
drops it.
"""

from __future__ import annotations

import functools
import json
import re
from importlib import resources
from typing import Any

from analyst_env.datasets.preview import describe_file

PREVIEW_MIN_INTEGER = 100
"""Integer answers below this are not looked for in previews: small counts occur in any table."""


def in_previews(paths: dict[str, str], oracle: str, style: str) -> bool:
    """Whether a numeric answer appears, as a whole number, in the file previews the reset shows."""
    if style not in ("number", "integer") or (
        style == "integer" and abs(int(oracle)) < PREVIEW_MIN_INTEGER
    ):
        return False
    shown = json.dumps([describe_file(n, p).preview for n, p in sorted(paths.items())])
    core = re.escape(oracle.lstrip("-"))
    return re.search(rf"(?<![\d.]){core}(?!\d|\.\d)", shown) is not None


@functools.cache
def shared_text() -> str:
    """What every episode shows whatever its task: the reset message, the tools, the prompts.

    A label gold that is a word of it would be "shown" to every episode (``validate``
    counts that as a leak), so such a task is dropped. Read from a snapshot shipped
    beside this module (``server.shown_text`` makes it; a test keeps the two equal).
    """
    text = resources.files(__package__).joinpath("shown_text.txt").read_text("utf-8")
    return text.removesuffix("\n")


def in_shared_text(answer: Any) -> bool:
    """Whether a label of the answer is a whole word of :func:`shared_text` (case-insensitive)."""
    atoms = answer if isinstance(answer, list) else [answer]
    labels = [a[1] if isinstance(a, (list, tuple)) else a for a in atoms]
    text = shared_text()
    return any(
        isinstance(v, str)
        and re.search(rf"(?<!\w){re.escape(v)}(?!\w)", text, re.IGNORECASE) is not None
        for v in labels
    )
