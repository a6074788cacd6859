"""`analyst-env bench --quick`: the benchmark runs end to end and writes every figure.

A smoke test of the measuring machinery only; the numbers themselves are checked by
reading BENCHMARKS.md, never by timed assertions.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.live

BURST = {
    "burst_reset_p50_ms",
    "burst_reset_p99_ms",
    "burst_first_step_p50_ms",
    "burst_first_step_p99_ms",
    "burst_step_p50_ms",
    "burst_step_p99_ms",
    "burst_steps_per_s",
    "burst_again_reset_p50_ms",
    "burst_again_reset_p99_ms",
}
FIGURES = {
    "reset_p50_ms",
    "reset_p99_ms",
    "reset_burst_p50_ms",
    "step_p50_ms",
    "step_p99_ms",
    "describe_p50_ms",
    "idle_pss_mib",
    "max_concurrent",
    "grpo_batch_s",
    "serve_cold_start_s",
    "client_import_s",
    "step_p50_in_turn_ms",
    *BURST,
}


def test_bench_quick_writes_all_figures_for_all_targets(tmp_path):
    exe = shutil.which("analyst-env") or str(Path(sys.executable).with_name("analyst-env"))
    out = tmp_path / "b.json"
    proc = subprocess.run(
        [exe, "bench", "--quick", "--json", str(out)], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    figures = report["figures"]
    assert set(figures) == FIGURES
    for name, row in figures.items():
        assert set(row) == {"analyst_env", "jupyter_kernel", "protocol_floor"}
        assert isinstance(row["analyst_env"], (int, float)), name
    assert figures["describe_p50_ms"]["protocol_floor"] is None
    in_turn = figures["step_p50_in_turn_ms"]  # analyst_env and the floor, stepped in turn
    assert in_turn["jupyter_kernel"] is None and in_turn["protocol_floor"] > 0, in_turn
    assert figures["max_concurrent"]["analyst_env"] == report["config"]["max_probe"]
    assert figures["reset_p50_ms"]["jupyter_kernel"] > figures["reset_p50_ms"]["protocol_floor"]
    assert {g["goal"] for g in report["goals"]} >= {
        "reset p50 <= 10 ms",
        ">= 500 concurrent live episodes",
        "trivial cell <= 3x the protocol floor, stepped in turn",
    }
    assert "| reset_p50_ms |" in proc.stdout


def test_bench_burst_only_measures_the_bursts_against_the_protocol_floor(tmp_path):
    exe = shutil.which("analyst-env") or str(Path(sys.executable).with_name("analyst-env"))
    out = tmp_path / "b.json"
    proc = subprocess.run(
        [exe, "bench", "--quick", "--burst-only", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert set(report["figures"]) == BURST | {"serve_cold_start_s"}
    for name, row in report["figures"].items():
        assert row["jupyter_kernel"] is None, name
        assert row["analyst_env"] > 0 and row["protocol_floor"] > 0, name
    assert {g["goal"] for g in report["goals"]} == {
        "burst reset p99 <= 1 s (256 at once)",
        "burst reset p99 <= 1 s, the next burst (pool sized by the first)",
        "256-client trivial-step p99 <= 50 ms",
    }
    assert "load average" in report["notes"]["load_average"]


def test_bench_import_only_times_each_client_import(tmp_path):
    """The client import figure alone: fresh interpreters, no server; a goal with a verdict."""
    exe = shutil.which("analyst-env") or str(Path(sys.executable).with_name("analyst-env"))
    out = tmp_path / "i.json"
    proc = subprocess.run(
        [exe, "bench", "--quick", "--import-only", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert set(report["figures"]) == {"client_import_s"}
    row = report["figures"]["client_import_s"]
    assert all(isinstance(row[t], float) and row[t] >= 0 for t in row), row
    assert [g["goal"] for g in report["goals"]] == [
        "client import: `import analyst_env.client` <= 0.5 s"
    ]
    assert isinstance(report["goals"][0]["met"], bool)
    assert "| client_import_s |" in proc.stdout
