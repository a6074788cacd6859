"""The text every episode shows whatever its task: the reset message, the tools, the prompts.

A label answer that is a word of this text would be shown to every episode, so the
procedural generator drops such tasks. The generator reads a snapshot of it
(``datasets/procedural/shown_text.txt``), not this module: ``datasets/`` never
imports the server or the client, and a snapshot keeps the tasks a seed makes the
same whatever pydantic renders the schemas as. A test compares the two, and
rewrites the snapshot when asked (``tests/datasets/test_shown_text.py``).
"""

from __future__ import annotations

import json

from analyst_env.prompts import SYSTEM_PROMPT, hermes_tools_prompt
from analyst_env.server.episode_start import READY_MESSAGE
from analyst_env.server.tools import TOOLS


def shown_to_every_episode() -> str:
    """The reset message, the tool catalogue as JSON and the trainers' system prompts."""
    specs = [t.spec() for t in TOOLS.values()]
    catalogue = json.dumps([s.model_dump(mode="json") for s in specs])
    return "\n".join([READY_MESSAGE, catalogue, SYSTEM_PROMPT, hermes_tools_prompt(specs)])
