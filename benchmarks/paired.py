"""The trivial cell of two servers measured in turn, block after block, for their ratio.

Why: ``bench`` measures each target on its own, minutes apart, and on a shared machine
the protocol floor's own step moved from 0.24 to 0.43 ms between two quiet runs, so the
ratio of the trivial cell to the floor moved from 2.7x to 4.0x with no change to the
server. Stepping both servers in alternating blocks puts each pair of blocks under the
same machine state; the medians over the blocks are what the ratio goal reads.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping

from analyst_env.benchmarks import measure

TRIVIAL = measure.cell("1+1")
WARM_UP_STEPS = 50
"""Untimed steps on each server first (the first cells of an episode pay for imports)."""


async def steps_in_turn(
    ws_urls: Mapping[str, str], reset_frame: str, blocks: int, steps: int
) -> dict[str, float]:
    """Step a ``1+1`` cell on each server in turn: ``blocks`` rounds of ``steps`` per server.

    The order flips every round (A B, B A, ...), so neither server always runs right
    after the other. Returns each server's median over the rounds of its per-round p50.
    """
    if len(ws_urls) < 2 or blocks < 1 or steps < 1:
        raise ValueError("steps_in_turn needs two servers or more, blocks >= 1 and steps >= 1")
    names = list(ws_urls)
    sessions = {n: await measure.Session(ws_urls[n], reset_frame).open() for n in names}
    try:
        for session in sessions.values():
            await session.reset()
            for _ in range(WARM_UP_STEPS):
                await session.step(TRIVIAL)
        p50s: dict[str, list[float]] = {n: [] for n in names}
        for block in range(blocks):
            for name in names if block % 2 == 0 else reversed(names):
                samples = [await sessions[name].step(TRIVIAL) for _ in range(steps)]
                p50s[name].append(statistics.median(samples))
    finally:
        for session in sessions.values():
            await session.close()
    return {n: statistics.median(p50s[n]) for n in names}
