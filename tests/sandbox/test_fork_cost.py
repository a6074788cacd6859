"""``python -m analyst_env.envs.local.fork_cost``: the floor of making a kernel, measured."""

from __future__ import annotations

import subprocess
import sys


def test_fork_cost_reports_parent_and_child_cpu_of_a_warm_zygote() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "analyst_env.envs.local.fork_cost", "--forks", "3", "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    figures = {line.split()[0]: float(line.split()[2]) for line in out.splitlines()}
    assert set(figures) == {"rss_mib", "wall_ms", "parent_cpu_ms", "child_cpu_ms"}
    # the warm default image: pandas, matplotlib, IPython and duckdb are in the heap
    assert figures["rss_mib"] > 100
    # every child ran a cell and was waited for, so both sides used CPU
    assert figures["parent_cpu_ms"] > 0 and figures["child_cpu_ms"] > 0
