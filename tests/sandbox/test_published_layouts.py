"""The leak probes against ``analyst-env serve`` in both layouts users run: editable and installed.

The installed layout is what the Dockerfile, a wheel and a hub Space ship: the
package sits in the very site-packages directory kernels import pandas from.
The suite builds a wheel of this checkout, installs it into a venv of its own
(``.venv/published-layouts``, outside /tmp, which the sandbox replaces; dependencies come from the
test
venv as a plain path entry, so the checkout's editable finder is not active
there), starts the server from it with ``--token`` on its command line, and
runs the probes of ``leak_probes`` in an episode: no server code importable,
no package source, cache or state readable, no token in any environment or
command line a kernel can see. The installed layout also serves the procedural
set, whose workbook tasks keep their reference workbook in the task cache: an
episode of such a task must not reach it; and a ``tasks:DIR`` set scored by
``verify`` commands, where the cells of ``verify_attacks`` (a fake ``grep``,
background ``reward.txt`` writers, environment tricks) must not pass a wrong answer.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import httpx
import pytest
from leak_probes import leaks, parse, probe_code
from verify_attacks import BACKGROUND_WRITERS, ENV_TRICK_HOOKS, ENV_TRICKS, FAKE_GREP, GREP_42

from analyst_env.client import AnalystEnv
from analyst_env.datasets.procedural import ProceduralDataset
from analyst_env.server.local_server import free_port

pytestmark = pytest.mark.live
REPO = Path(__file__).resolve().parents[2]
# Under .venv like the verifiers venv: ignored by git and by `openenv validate`'s source digest
# (a venv holds symlinks, which the digest refuses).
BUILD = REPO / ".venv" / "published-layouts"
TOKEN = "probe-token-7f3a9c"
PROCEDURAL_SEED = 9090
BOOK_CATEGORIES = ("result-workbook", "excel-edit")
VERIFIED_TASK = "verified-by-commands"


def _verify_task_dir(root: Path) -> Path:
    """A ``tasks:DIR`` set of one task scored only by shell ``verify`` commands (Harbor style)."""
    (root / "files").mkdir(parents=True, exist_ok=True)
    (root / "files" / "numbers.csv").write_text("n\n40\n2\n")
    task = {
        "id": VERIFIED_TASK,
        "instruction": "What is the sum of column n in numbers.csv? Answer with the number.",
        "files": {"numbers.csv": "files/numbers.csv"},
        "answer": "42",
        "oracle_answer": "42",
        "verifier": {"name": "exact"},
        "verify": [GREP_42, *ENV_TRICK_HOOKS],
    }
    (root / "tasks.jsonl").write_text(json.dumps(task) + "\n")
    return root


def _workbook_task(cache: Path) -> tuple[str, Path]:
    """A procedural workbook task's id and where the server keeps its reference (same seed,
    same cache root: the server makes the very same task folder)."""
    ds = ProceduralDataset(PROCEDURAL_SEED, cache_dir=cache)
    for index in range(400):
        task = ds.task("train", index)
        if task.metadata["category"] in BOOK_CATEGORIES:
            return task.id, ds.root / f"train-{index}" / "references"
    raise AssertionError("no workbook task in the first 400 procedural tasks")


@functools.cache
def _installed_python() -> Path:
    """A venv with this checkout installed from a wheel (rebuilt every run)."""
    wheels = BUILD / "wheel"
    shutil.rmtree(wheels, ignore_errors=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(wheels),
            str(REPO),
        ],
        check=True,
        cwd=BUILD,
    )
    venv = BUILD / "venv"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(
        subprocess.check_output(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
        ).strip()
    )
    (site / "test-venv-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    wheel = next(wheels.glob("analyst_env-*.whl"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "-q",
            "--no-deps",
            "--force-reinstall",
            str(wheel),
        ],
        check=True,
        cwd=BUILD,
    )
    located = subprocess.check_output(
        [python, "-c", "import analyst_env; print(analyst_env.__file__)"], text=True, cwd=BUILD
    )
    assert located.startswith(str(site)), located  # really the installed copy, not the checkout
    return python


@pytest.fixture(
    scope="module",
    params=[
        ("editable", "starter"),
        ("installed", "starter"),
        ("installed", "procedural"),
        ("installed", "verify"),
    ],
    ids=lambda p: "-".join(p),
)
def layout(request):
    name, dataset = request.param
    BUILD.mkdir(parents=True, exist_ok=True)
    python = Path(sys.executable) if name == "editable" else _installed_python()
    cache, state = BUILD / f"cache-{name}-{dataset}", BUILD / f"state-{name}-{dataset}"
    shutil.rmtree(cache, ignore_errors=True)
    hidden = [str(cache), str(state)]
    task_id, extra = "starter-sales-000", []
    if dataset == "procedural":
        task_id, references = _workbook_task(cache)
        hidden.append(str(references))
        extra = ["--dataset", f"procedural:{PROCEDURAL_SEED}"]
    if dataset == "verify":
        task_id = VERIFIED_TASK
        extra = ["--dataset", f"tasks:{_verify_task_dir(BUILD / 'verify-tasks')}"]
    port = free_port()
    env = {
        **os.environ,
        "ANALYST_ENV_CACHE": str(cache),
        "ANALYST_ENV_STATE_DIR": str(state),
        "SECRET_API_KEY": TOKEN,
    }
    proc = subprocess.Popen(
        [
            python,
            "-m",
            "analyst_env.cli",
            "serve",
            "--port",
            str(port),
            "--token",
            TOKEN,
            "--log-level",
            "warning",
            *extra,
        ],
        cwd=BUILD,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while True:
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the {name} server did not start: {proc.stderr.read().decode()[-3000:]}")
        time.sleep(0.2)
    try:
        yield name, task_id, url, hidden
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_an_episode_reaches_no_gold_no_secret_and_no_server_code(layout):
    name, task_id, url, hidden = layout
    with AnalystEnv(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}).sync() as env:
        reset = env.reset(task_id=task_id)
        assert reset.observation.task_id == task_id
        out = env.add_and_execute_code_cell(probe_code(TOKEN, hidden)).observation.text
        results = parse(out)
        assert leaks(results) == {}, (name, results)
        # Real work still runs: the task's file, pandas, the episode's own files.
        data = sorted(f.name for f in reset.observation.files)[0]
        out = env.add_and_execute_code_cell(
            f"import os\nos.path.getsize({data!r}) > 0"
        ).observation.text
        assert "True" in out, out


def _cell(env, code: str) -> str:
    return env.add_and_execute_code_cell(code).observation.text


@pytest.mark.parametrize("layout", [("installed", "verify")], indirect=True, ids=["installed"])
def test_verify_commands_are_out_of_the_agents_reach(layout):
    name, task_id, url, _ = layout
    headers = {"Authorization": f"Bearer {TOKEN}"}
    for answer, reward in (("41", 0.0), ("42", 1.0)):
        with AnalystEnv(base_url=url, headers=headers).sync() as env:
            env.reset(task_id=task_id)
            assert "writers started" in _cell(env, BACKGROUND_WRITERS)
            assert "replaced /usr/bin/grep" not in _cell(env, FAKE_GREP)
            assert "environment set" in _cell(env, ENV_TRICKS)
            done = env.final_answer(answer)
        assert done.done and done.reward == reward, (name, answer, done.observation.metadata)


def _worker_scorings(url: str) -> float:
    """``analyst_env_worker_scorings`` from the server's /metrics."""
    text = httpx.get(url + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).text
    (line,) = [ln for ln in text.splitlines() if ln.startswith("analyst_env_worker_scorings ")]
    return float(line.split()[1])


@pytest.mark.parametrize("layout", [("installed", "starter")], indirect=True, ids=["installed"])
def test_the_installed_scoring_workers_score_saved_workbooks(layout):
    """The wheel's scoring workers (``python -I -m analyst_env.verifiers.score_worker`` of the
    installed venv) start and score: workbooks saved right get 1.0, ones with a wrong value 0,
    until /metrics shows several answers scored by workers (summed over the server's
    processes, each with its own pool; the first answers of each are scored by a fork while
    its worker starts)."""
    name, _, url, _ = layout
    from analyst_env.datasets import load_dataset

    (task,) = [t for t in load_dataset("starter").tasks if t.id == "starter-sales-wb-000"]
    (step,) = task.oracle_steps
    right = step.arguments["code"]
    wrong = right.replace("24681.33", "12000.0")
    assert wrong != right
    headers = {"Authorization": f"Bearer {TOKEN}"}

    def episode(code: str) -> float:
        with AnalystEnv(base_url=url, headers=headers).sync() as env:
            env.reset(task_id=task.id)
            assert "saved 1 sheets" in _cell(env, code)
            return float(env.final_answer("done").reward or 0.0)

    before, deadline = _worker_scorings(url), time.monotonic() + 120
    while _worker_scorings(url) < before + 4:
        assert time.monotonic() < deadline, f"answers were not scored by workers ({name})"
        assert (episode(right), episode(wrong)) == (1.0, 0.0)
        time.sleep(0.5)  # the gauges of several server processes are shared each second
