"""The adapter throughput benchmark plays real episodes through every adapter it reports.

``python -m analyst_env.benchmarks.adapter_rates`` is what BENCHMARKS.md's adapter
table comes from; this runs it small (a real server, the no-op policy, each adapter in
its own interpreter) and checks that each figure stands on episodes the server really
ended, so a driver that silently played nothing could not report a rate. ART, HUD and
OpenRLHF run only where their venvs or folder exist (``.ci/run`` makes them); elsewhere the
report must say which part was missing.
"""

from __future__ import annotations

import pytest

from analyst_env.benchmarks.adapter_rates import (
    ADAPTERS,
    format_markdown,
    interpreters,
    measure,
    missing_part,
)

pytestmark = pytest.mark.live

EPISODES = 6


def test_every_adapter_is_measured_on_episodes_the_server_ended():
    report = measure(EPISODES, 2, ADAPTERS)
    pythons = interpreters()
    assert len(report["client_rates"]) == 2  # before and after the adapters
    baseline = sum(report["client_rates"]) / 2
    for name in ["client", *ADAPTERS]:
        run = report["adapters"][name]
        missing = missing_part(name, pythons[name])
        if missing:
            assert run == {"error": missing}
            continue
        assert "error" not in run, f"{name}: {run.get('error')}"
        assert run["episodes"] == EPISODES and run["ended"] == EPISODES, (name, run)
        assert run["seconds"] > 0
        assert run["ratio"] == pytest.approx(run["rate"] / baseline)
    table = format_markdown(report)
    assert table.count("\n| ") == 1 + len(report["adapters"])  # a header and a row each


def test_a_driver_that_fails_is_reported_with_its_error(monkeypatch, tmp_path):
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'ModuleNotFoundError: no art here' >&2\nexit 1\n")
    broken.chmod(0o755)
    monkeypatch.setenv("ANALYST_ENV_ART_PYTHON", str(broken))
    report = measure(2, 1, ["art"])
    assert report["adapters"]["art"] == {"error": "ModuleNotFoundError: no art here"}
    assert "not measured: ModuleNotFoundError" in format_markdown(report)
