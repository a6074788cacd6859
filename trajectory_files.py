"""Where recorded trajectories live and how to read one: shared by their writer and readers.

The server (``server/trajectories.py``) appends one JSONL file per episode under the
state directory; the exporters (``trainers/trajectory_export.py``), ``/web``'s replay and
eval's run pages read them. Standard library only, so a reader needs nothing of the
server.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TRAJECTORIES_DIR = "trajectories"


def trajectories_dir(state_dir: str | Path) -> Path:
    """Where the trajectories of a server with ``state_dir`` live.

    >>> trajectories_dir("/srv/state").as_posix()
    '/srv/state/trajectories'
    """
    return Path(state_dir).expanduser() / TRAJECTORIES_DIR


def read_trajectory(path: str | Path) -> list[dict[str, Any]]:
    """The records of one trajectory file; a torn last line (a crash mid-write) is skipped."""
    records = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return records
