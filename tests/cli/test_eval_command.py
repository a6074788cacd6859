"""``analyst-env eval --model``: the installed command against the stand-in model server.

The command runs as a user runs it (a subprocess, its own in-process
environment server, a state directory of its own); the model is the stand-in
of ``tests/eval/openai_standin.py`` on a loopback port in this process.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "eval"))

from openai_standin import StandIn  # noqa: E402

from analyst_env.datasets import load_dataset  # noqa: E402
from analyst_env.server.local_server import free_port  # noqa: E402

pytestmark = pytest.mark.live

EXE = shutil.which("analyst-env") or str(Path(sys.executable).with_name("analyst-env"))
STARTER = load_dataset("starter").tasks


@pytest.fixture(scope="module")
def standin():
    with StandIn(STARTER) as server:
        yield server


def eval_cmd(standin, state_dir: Path, *args: str) -> list[str]:
    return [
        EXE,
        "eval",
        "--dataset",
        "starter",
        "--model",
        "standin",
        "--model-url",
        f"{standin.url}/v1",
        "--retry-backoff",
        "0.01",
        *args,
    ]


def run_eval(standin, state_dir: Path, *args: str, timeout: float = 300):
    env = {**os.environ, "ANALYST_ENV_STATE_DIR": str(state_dir)}
    return subprocess.run(
        eval_cmd(standin, state_dir, *args),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def test_a_model_run_writes_json_html_log_and_trajectories(standin, tmp_path):
    standin.use("oracle")
    out = tmp_path / "out" / "report.json"
    proc = run_eval(standin, tmp_path, "--limit", "3", "--temperature", "0.7", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "n=3 mean_reward=1.0000 pass@1=1.0000 errors=0" in proc.stdout
    assert "acc=1.000" in proc.stderr  # the progress bar's running accuracy
    report = json.loads(out.read_text())
    assert report["model"]["name"] == "standin" and report["model"]["tool_format"] == "native"
    assert report["sampling"] == {"temperature": 0.7}
    assert all(r["temperature"] == 0.7 for r in standin.requests)
    html = out.with_suffix(".html").read_text()
    assert html.count("data:image/png;base64,") >= 3
    assert "<script" not in html and "http://" not in html.replace(standin.url, "")
    run_dir = tmp_path / "runs" / report["run_id"]
    assert {p.name for p in run_dir.iterdir()} == {"log.jsonl", "report.json", "report.html"}
    recorded = list((tmp_path / "trajectories").glob("*-eval-*.jsonl"))
    assert len(recorded) == 3


def test_an_interrupted_run_resumes_where_it_stopped(standin, tmp_path):
    standin.use("oracle", hold_after=2)  # the third episode waits for its model's reply
    env = {**os.environ, "ANALYST_ENV_STATE_DIR": str(tmp_path)}
    args = eval_cmd(standin, tmp_path, "--limit", "5", "--concurrency", "1")
    # A command started in the background (`cmd &`, nohup) ignores SIGINT, and so does
    # every process it starts: this eval would never see the Ctrl-C. Start it with the
    # default disposition, as from a terminal.
    inherited = signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        first = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    finally:
        signal.signal(signal.SIGINT, inherited)
    try:
        deadline = time.monotonic() + 240
        logs: list[Path] = []
        while time.monotonic() < deadline:
            logs = list((tmp_path / "runs").glob("*/log.jsonl"))
            if logs and len(logs[0].read_text().splitlines()) >= 3:  # the header and two episodes
                break
            assert first.poll() is None, first.communicate()
            time.sleep(0.1)
        first.send_signal(signal.SIGINT)
        _, stderr = first.communicate(timeout=120)
        assert first.returncode == 130 and b"run the same command again to resume" in stderr
        assert b"Traceback" not in stderr
    finally:
        if first.poll() is None:
            first.kill()
    done_before = {json.loads(line)["task_id"] for line in logs[0].read_text().splitlines()[1:]}
    assert len(done_before) == 2
    standin.use("oracle")
    proc = run_eval(standin, tmp_path, "--limit", "5", "--concurrency", "1")
    assert proc.returncode == 0, proc.stderr
    assert "resuming: 2 of 5 episodes are already in this run's log (3 to play)" in proc.stderr
    asked = {task.id for task in STARTER[:5] if standin.requests_for(task)}
    assert asked == {t.id for t in STARTER[:5]} - done_before
    report = json.loads((logs[0].parent / "report.json").read_text())
    assert report["n"] == 5 and report["complete"] and report["mean_reward"] == 1.0


@pytest.mark.parametrize(
    "args, says",
    [
        (["--model", "m"], "--model needs --model-url"),
        (
            ["--model", "m", "--model-url", "http://127.0.0.1:9/v1", "--samples", "0"],
            "--samples must be at least 1",
        ),
        (
            [
                "--model",
                "m",
                "--model-url",
                "http://127.0.0.1:9/v1",
                "--api-key-env",
                "NO_SUCH_VAR_17",
            ],
            "NO_SUCH_VAR_17: that variable is not set",
        ),
        (["--policy", "oracle", "--split", "nope"], "no tasks in split 'nope'"),
        (["--policy", "oracle", "--limit", "-1"], "--limit must be at least 1"),
        (
            ["--model", "m", "--model-url", "http://127.0.0.1:9/v1", "--retries", "-1"],
            "--retries and --retry-backoff cannot be negative",
        ),
    ],
)
def test_bad_settings_are_refused_with_a_reason(tmp_path, args, says):
    env = {**os.environ, "ANALYST_ENV_STATE_DIR": str(tmp_path)}
    proc = subprocess.run(
        [EXE, "eval", "--dataset", "starter", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr


def test_an_unreachable_endpoint_is_reported_not_crashed(tmp_path):
    env = {**os.environ, "ANALYST_ENV_STATE_DIR": str(tmp_path)}
    url = f"http://127.0.0.1:{free_port()}/v1"
    proc = subprocess.run(
        [
            EXE,
            "eval",
            "--dataset",
            "starter",
            "--limit",
            "1",
            "--model",
            "m",
            "--model-url",
            url,
            "--retries",
            "1",
            "--retry-backoff",
            "0.01",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    assert proc.returncode == 2, proc.stderr
    assert "connection failed" in proc.stderr and "after 2 attempts" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "runs").exists()  # no empty run is left behind
