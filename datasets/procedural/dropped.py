"""The exception a procedural draw raises when it fails a check."""

from __future__ import annotations


class Dropped(Exception):
    """A drawn task failed a check; ``reason`` is the counted cause."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
