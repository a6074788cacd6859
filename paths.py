"""Where analyst_env keeps files on the host: one root for the generated task cache and server
state.

A module of its own (stdlib only) so the server's settings can name the state
directory without importing the datasets package.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """The cache root: ``$ANALYST_ENV_CACHE`` or ``~/.cache/analyst_env``."""
    env = os.environ.get("ANALYST_ENV_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "analyst_env"
