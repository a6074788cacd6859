"""End to end over a live server: oracle 1.0 and null 0.0 on every SheetCopilot, DA-Code and
TableBench task.

Each dataset is served by the real app on a loopback port and driven by the
same ``evaluate`` the ``analyst-env eval`` command uses. SheetCopilot scoring
recalculates workbooks with LibreOffice (about a second per episode).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from analyst_env.datasets.registry import load_dataset
from analyst_env.evaluation.engine import evaluate
from analyst_env.server.app import build_app
from analyst_env.server.local_server import BackgroundServer
from analyst_env.server.runtime import Runtime
from analyst_env.server.settings import Settings
from analyst_env.verifiers.recalc import soffice_path

pytestmark = [pytest.mark.live, pytest.mark.dataset]

SETS = {
    "sheetcopilot": "tasks.jsonl",
    "dacode": "tasks.jsonl",
    "tablebench": "TableBench_DP_examples.jsonl",
}


def shared(name: str) -> Path:
    env = os.environ.get("ANALYST_ENV_SHARED_DATASETS")
    path = (
        Path(env) if env else Path(__file__).resolve().parents[3] / "shared" / "datasets"
    ) / name
    if not (path / SETS[name]).is_file():
        pytest.skip(f"{name} data not found at {path} (set ANALYST_ENV_SHARED_DATASETS)")
    return path


@pytest.mark.parametrize("name", sorted(SETS))
def test_oracle_solves_and_null_fails_every_task(name, tmp_path, monkeypatch):
    if name == "sheetcopilot" and soffice_path() is None:
        pytest.skip("LibreOffice (soffice) not installed: workbooks cannot be recalculated")
    monkeypatch.setenv("ANALYST_ENV_CACHE", str(tmp_path))
    dataset = load_dataset(f"{name}:{shared(name)}")
    settings = Settings(cell_timeout_s=60.0, max_sessions=16)
    runtime = Runtime(settings, datasets=[dataset])
    try:
        with BackgroundServer(build_app(settings, runtime=runtime)) as url:
            oracle = asyncio.run(evaluate(url, dataset.tasks, "oracle", concurrency=4))
            null = asyncio.run(evaluate(url, dataset.tasks, "null", concurrency=4))
    finally:
        runtime.close()
    broken = {t.id for t in dataset.tasks if t.metadata.get("gold_status") not in ("ok", None)}
    unsolved = [r for r in oracle if r["task_id"] not in broken and r["reward"] != 1.0]
    assert not unsolved, unsolved
    gamed = [r for r in null if r["reward"] != 0.0]
    assert not gamed, gamed
    assert len(oracle) == len(null) == len(dataset.tasks)
