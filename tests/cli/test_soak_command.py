"""`analyst-env soak`: a short soak of a real server ends with zero leaks; a threshold crossed exits
1."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.live


def soak(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    exe = shutil.which("analyst-env") or str(Path(sys.executable).with_name("analyst-env"))
    out = tmp_path / "soak.json"
    proc = subprocess.run(
        [exe, "soak", *args, "--json", str(out)], capture_output=True, text=True, timeout=280
    )
    return proc, json.loads(out.read_text())


def test_a_short_soak_answers_every_frame_and_leaks_nothing(tmp_path):
    proc, report = soak(tmp_path, "--sessions", "3", "--minutes", "0.3")
    assert proc.returncode == 0, (report["failures"], report["problems"], proc.stderr[-2000:])
    assert report["ok"] and report["leaks"] == dict.fromkeys(
        ("processes", "fds", "mounts", "cgroups", "scratch_dirs"), 0
    )
    assert report["episodes"] >= 3 and report["frames_answered"] > 20
    # What is counted is this server's own: its scratch directory, and as root its cgroups.
    assert report["baseline"]["scratch_dirs"] == 1, report["baseline"]
    assert report["baseline"]["cgroups"] > 0 or os.geteuid() != 0, report["baseline"]
    assert len(report["actions"]) >= 12, report["actions"]  # valid, invalid, hostile and cuts
    assert report["rss_growth_pct"] < 5


def test_a_crossed_threshold_exits_non_zero_and_says_which(tmp_path):
    proc, report = soak(
        tmp_path,
        *("--sessions", "2", "--minutes", "0.05", "--max-rss-growth", "-100"),
        *("--warm-up", "0", "--settle", "2"),  # only the verdict is looked at
    )
    assert proc.returncode == 1 and not report["ok"]
    assert any(f.startswith("RSS grew") for f in report["failures"]), report["failures"]
