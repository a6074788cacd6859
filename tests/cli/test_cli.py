"""The analyst-env command, run as a user runs it: a subprocess of the installed script."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from support import SHARED_DATASETS

from analyst_env.server.local_server import free_port

EXE = shutil.which("analyst-env") or str(Path(sys.executable).with_name("analyst-env"))
DABENCH = SHARED_DATASETS / "dabench"


def run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=timeout)


def eval_report(tmp_path: Path, dataset: str, policy: str) -> dict:
    out = tmp_path / f"{policy}.json"
    proc = run("eval", "--dataset", dataset, "--policy", policy, "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert {"dataset", "policy", "n", "mean_reward", "tasks"} <= set(report)
    assert report["dataset"] == dataset and report["policy"] == policy
    assert report["n"] == len(report["tasks"]) > 0
    assert all({"task_id", "reward"} <= set(t) for t in report["tasks"])
    return report


@pytest.mark.parametrize("policy, reward", [("oracle", 1.0), ("null", 0.0)])
def test_eval_on_the_shipped_set(tmp_path, policy, reward):
    report = eval_report(tmp_path, "starter", policy)
    assert report["n"] >= 100
    assert [t["task_id"] for t in report["tasks"] if t["reward"] != reward] == []
    assert report["mean_reward"] == reward


@pytest.mark.dataset
@pytest.mark.parametrize("policy, reward", [("oracle", 1.0), ("null", 0.0)])
def test_eval_on_dabench(tmp_path, policy, reward):
    if not DABENCH.is_dir():
        pytest.skip(f"DABench data not found at {DABENCH}")
    report = eval_report(tmp_path, f"dabench:{DABENCH}", policy)
    assert report["n"] == 120
    assert [t["task_id"] for t in report["tasks"] if t["reward"] != reward] == []


def test_tasks_lists_datasets_and_tasks():
    proc = run("tasks")
    assert proc.returncode == 0 and "starter" in proc.stdout and "dabench:PATH" in proc.stdout
    proc = run("tasks", "--dataset", "starter", "--json")
    tasks = json.loads(proc.stdout)
    assert len(tasks) >= 100 and all("answer" not in t for t in tasks)


def test_serve_refuses_a_public_address_without_a_token():
    env = {k: v for k, v in os.environ.items() if k != "ANALYST_ENV_TOKEN"}
    proc = subprocess.run(
        [EXE, "serve", "--host", "0.0.0.0", "--port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 2
    assert "without a token" in proc.stderr and "--insecure" in proc.stderr


@pytest.mark.live
def test_serve_starts_with_zero_config_and_eval_runs_against_it(tmp_path):
    port = free_port()
    server = subprocess.Popen(
        [EXE, "serve", "--port", str(port), "--token", "t0k"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, "server did not start"
            time.sleep(0.2)
        assert httpx.get(f"{url}/metadata").status_code == 401
        out = tmp_path / "r.json"
        proc = run(
            "eval",
            "--dataset",
            "starter",
            "--policy",
            "oracle",
            "--url",
            url,
            "--token",
            "t0k",
            "--limit",
            "10",
            "--json",
            str(out),
        )
        assert proc.returncode == 0, proc.stderr
        report = json.loads(out.read_text())
        assert report["n"] == 10 and report["mean_reward"] == 1.0
    finally:
        server.send_signal(signal.SIGINT)
        output, _ = server.communicate(timeout=60)
    assert f"http://127.0.0.1:{port}" in output
