"""The options the remote backends take in common, one small frozen object each.

A backend whose sandboxes serve episodes in turn keeps warm slots; how many, and for how
many episodes each, is one object that every such backend's constructor takes (as httpx's
clients take ``Limits``), instead of the same loose keywords repeated on every backend.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WarmPool:
    """The slots kept ready by a backend whose sandboxes serve episodes in turn
    (``slots.RunnerBackend``): a reset takes an idle slot instead of waiting for a sandbox.

    Attributes:
        warm: Idle slots kept ready per image once the image was used.
        max_episodes: Episodes a slot serves before it is replaced.

    Raises:
        ValueError: ``warm`` below 0 or ``max_episodes`` below 1.
    """

    warm: int = 1
    max_episodes: int = 200

    def __post_init__(self) -> None:
        if self.warm < 0 or self.max_episodes < 1:
            raise ValueError("warm must be >= 0 and max_episodes >= 1")
