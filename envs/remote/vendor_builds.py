"""How a backend whose vendor builds its images (Azure's disk images, Daytona's and Deno's
snapshots, Prime's images, Runloop's blueprints) finds a build and waits for it.

Servers that share a vendor account share its builds: the build a server needs may already
be listed under its name, made by another server, ready, still building or failed. So a
backend uses the build that is furthest along (``furthest_build``) instead of starting a
second one, and polls one still building until the vendor is done with it
(``wait_while_building``); what a build that failed, or is still building when the time
is up, means is the backend's to say, with its vendor's reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TypeVar

Build = TypeVar("Build")

#: How often a build in progress is read again.
POLL_S = 2.0


def furthest_build(
    found: Iterable[Build],
    *,
    ready: Callable[[Build], bool],
    building: Callable[[Build], bool],
) -> Build | None:
    """Of the builds listed under one name: the first ready one, else the first still
    building, else the first at all (a failed one, whose reason the caller reports), else
    None (nothing to wait for: the caller starts the build)."""
    found = list(found)
    for wanted in (ready, building):
        for build in found:
            if wanted(build):
                return build
    return found[0] if found else None


def wait_while_building(
    build: Build,
    refresh: Callable[[], Build],
    building: Callable[[Build], bool],
    timeout_s: float,
) -> Build:
    """``build`` once ``building`` says it is not building any more, read again with
    ``refresh`` every ``POLL_S`` seconds; or as last read when ``timeout_s`` is up (the
    caller refuses a build that is still building)."""
    deadline = time.monotonic() + timeout_s
    while building(build) and time.monotonic() < deadline:
        time.sleep(POLL_S)
        build = refresh()
    return build
