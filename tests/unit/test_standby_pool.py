"""The standby pool's size: learnt from bursts of resets, held, then forgotten."""

from __future__ import annotations

import pytest

from analyst_env.envs.local.standby_pool import BURST_MIN_IN_FLIGHT, StandbyDemand


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def burst(demand: StandbyDemand, size: int) -> None:
    for _ in range(size):
        demand.began()
    for _ in range(size):
        demand.ended()


def test_quiet_pool_is_the_floor() -> None:
    assert StandbyDemand(4, 256).target() == 4


def test_a_burst_sets_the_target_and_the_ceiling_caps_it() -> None:
    clock = Clock()
    demand = StandbyDemand(4, 256, clock=clock)
    burst(demand, 100)
    assert demand.target() == 100
    burst(demand, 1000)
    assert demand.target() == 256


def test_resets_one_at_a_time_are_not_a_burst() -> None:
    clock = Clock()
    demand = StandbyDemand(4, 256, clock=clock)
    for _ in range(500):  # a steady trickle: each reset ends before the next begins
        demand.began()
        clock.now += 0.005
        demand.ended()
        clock.now += 0.05
    assert demand.target() == 4


def test_overlapping_resets_count_as_one_burst_until_none_is_in_flight() -> None:
    clock = Clock()
    demand = StandbyDemand(2, 256, clock=clock)
    demand.began()
    for _ in range(30):  # one always in flight: arrivals overlap the previous reset
        demand.began()
        demand.ended()
    assert demand.target() == 31
    demand.ended()
    demand.began()  # a new burst starts from one
    assert demand.target() == 31  # the old one is still remembered


def test_a_burst_is_remembered_for_the_hold_then_forgotten() -> None:
    clock = Clock()
    demand = StandbyDemand(4, 256, hold_s=600, clock=clock)
    burst(demand, 64)
    clock.now += 500
    assert demand.target() == 64
    clock.now += 200
    assert demand.target() == 4


def test_a_stream_that_never_pauses_is_counted_over_a_few_seconds() -> None:
    clock = Clock()
    demand = StandbyDemand(4, 4096, clock=clock)
    demand.began()
    for _ in range(10_000):  # 100 resets/s for 100 s, never none in flight
        clock.now += 0.01
        demand.began()
        demand.ended()
    assert 400 <= demand.target() <= 520  # what arrives in ~5 s, not all 10,000


def test_floor_zero_means_no_pool_whatever_the_bursts() -> None:
    demand = StandbyDemand(0, 256)
    burst(demand, 50)
    assert demand.target() == 0


def test_refilling_waits_for_a_burst_but_not_for_a_stuck_reset() -> None:
    clock = Clock()
    demand = StandbyDemand(4, 256, clock=clock)
    for _ in range(BURST_MIN_IN_FLIGHT - 1):
        demand.began()
    assert not demand.burst_in_progress()  # a few clients' stream is not a burst
    demand.began()
    assert demand.burst_in_progress()  # a batch is
    clock.now += 5  # all stuck on hung kernels: refilling resumes
    assert not demand.burst_in_progress()
    for _ in range(BURST_MIN_IN_FLIGHT):
        demand.ended()
    assert not demand.burst_in_progress()


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(ValueError):
        StandbyDemand(-1, 4)
    with pytest.raises(ValueError):
        StandbyDemand(1, 4, hold_s=0)
