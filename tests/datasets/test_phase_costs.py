"""The generation phase report: every attempt counted once, phases inside their attempt."""

from __future__ import annotations

from analyst_env.datasets.procedural import generator, phase_costs


def test_phases_add_up_and_the_timers_are_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("ANALYST_ENV_CACHE", str(tmp_path))
    original_draw = generator.draw
    report = phase_costs.run(count=6, seed=1, split="train")

    assert report["passed"]["attempts"] == 6
    assert report["failed"]["attempts"] == report["dropped"]
    for kind in ("passed", "failed"):
        if not report[kind]["attempts"]:
            continue
        by_phase = report[kind]["mean_ms_by_phase"]
        assert set(by_phase) == {label for _, _, label in phase_costs.PHASES}
        top = [v for label, v in by_phase.items() if not label.startswith(" ")]
        assert 0 < sum(top) <= report[kind]["mean_ms"] * 1.01
    checks = report["passed"]["mean_ms_by_phase"]
    inside = [v for label, v in checks.items() if label.startswith("  ")]
    assert (
        sum(inside) <= checks["checks on the written files"] + checks["screen on the clean tables"]
    )

    slowest = report["slowest_1pct"]
    assert slowest["tasks"] == 1 and len(slowest["rows"]) == 1
    assert slowest["rows"][0]["attempts"] >= 1
    over = report["over_goal"]
    assert over["goal_ms"] == phase_costs.GOAL_MS
    assert sum(over["by_kind"].values()) == over["tasks"] <= 6
    assert (
        over["with_more_than_one_attempt"] + over["single_attempt_over_1000_rows"] <= over["tasks"]
    )
    assert generator.draw is original_draw  # the wrappers are gone
