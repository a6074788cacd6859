"""The supervisor of ``serve --workers N`` starts its workers before importing a server.

Everything the supervisor imports before it starts the workers is on the path to a
healthy ``/health``: the workers import the server themselves. ``server.workers`` once
imported the metrics for one constant, and with them the scorers (pandas, openpyxl):
about half a second of the supervisor's start-up, measured with ``python -m
analyst_env.benchmarks.startup`` (BENCHMARKS.md, "Start-up"). Checked by what a fresh
interpreter has imported, not by a timing.
"""

from __future__ import annotations

import json
import subprocess
import sys

WORKERS_DO_THESE = {"pandas", "numpy", "openpyxl", "duckdb", "fastapi", "uvicorn", "openenv"}


def test_the_supervisor_module_imports_no_server_or_data_stack():
    code = (
        "import json, sys\n"
        "import analyst_env.server.workers\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    imported = set(json.loads(done.stdout))
    assert "analyst_env" in imported
    assert imported & WORKERS_DO_THESE == set()


def test_the_metrics_read_the_variable_the_supervisor_sets():
    from analyst_env.server import metrics, workers

    assert metrics.MULTIPROC_ENV is workers.MULTIPROC_ENV == "PROMETHEUS_MULTIPROC_DIR"
