"""The Environments Hub package (``deploy/hub/analyst_env_verifiers``) under verifiers' own CLI.

The package is built into a wheel offline, installed into the verifiers venv
(``.venv/verifiers``, or ``$ANALYST_ENV_VERIFIERS_PYTHON``; verifiers 0.4 cannot share a
venv with openenv 0.10), then checked by ``vf-validate`` and played by ``vf-eval`` with
verifiers' ``null`` harness on its ``subprocess`` runtime: a live server started here and
the stand-in model (``tests/eval/openai_standin.py``) answering with OpenEnv JSON actions.
The harness's chat program is a uv script; ``.ci/run`` puts uv and a wheelhouse of the
script's packages in the venv, and uv's default index is that wheelhouse, so the test
downloads nothing (a package missing there fails the run instead).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from analyst_env.server.app import build_app
from analyst_env.server.local_server import BackgroundServer
from analyst_env.server.runtime import Runtime

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "eval"))
from openai_standin import StandIn  # noqa: E402
from tcp_cuts import DroppingProxy  # noqa: E402

pytestmark = pytest.mark.live

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "deploy" / "hub" / "analyst_env_verifiers"
PYTHON = Path(
    os.environ.get("ANALYST_ENV_VERIFIERS_PYTHON", REPO / ".venv" / "verifiers" / "bin" / "python")
)
VENV = PYTHON.parent.parent


@pytest.fixture(scope="module")
def bin_dir() -> Path:
    """The verifiers venv's scripts, with the package freshly built and installed there."""
    needed = [PYTHON, VENV / "bin" / "vf-eval", VENV / "bin" / "uv", VENV / "wheelhouse"]
    missing = [str(p) for p in needed if not p.exists()]
    if missing:
        pytest.skip(
            f"no verifiers venv with uv and its wheelhouse ({', '.join(missing)}): see .ci/run"
        )
    dist = VENV / "hub-dist"
    shutil.rmtree(dist, ignore_errors=True)  # one wheel: this checkout's
    offline = ["--quiet", "--no-deps", "--no-index"]
    pip = [str(PYTHON), "-m", "pip"]
    build = [*pip, "wheel", *offline, "--no-build-isolation", str(PACKAGE), "-w", str(dist)]
    subprocess.run(build, check=True, capture_output=True, timeout=120)
    (wheel,) = dist.glob("analyst_env_verifiers-*.whl")
    install = [*pip, "install", *offline, "--force-reinstall", str(wheel)]
    subprocess.run(install, check=True, capture_output=True, timeout=120)
    return VENV / "bin"


@pytest.fixture(scope="module")
def server(settings, tiny_dataset, tmp_path_factory):
    cfg = settings.model_copy(update={"state_dir": str(tmp_path_factory.mktemp("hub-state"))})
    runtime = Runtime(cfg, datasets=[tiny_dataset])
    try:
        with BackgroundServer(build_app(cfg, runtime=runtime)) as url:
            yield url, list(runtime.split("train"))
    finally:
        runtime.close()


def verifiers_cli(bin_dir: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess:
    """One verifiers CLI command, offline: uv resolves the harness script from the wheelhouse."""
    home = VENV / "home"  # verifiers' cache (~/.cache/verifiers) and the runtime's workdirs
    env = dict(
        os.environ,
        HOME=str(home),
        PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        UV_CACHE_DIR=str(VENV / "uv-cache"),
        UV_FIND_LINKS=str(VENV / "wheelhouse"),
        UV_DEFAULT_INDEX=(VENV / "wheelhouse").as_uri(),  # in place of PyPI (no simple index)
        UV_PYTHON=str(PYTHON),
        UV_PYTHON_DOWNLOADS="never",
        STANDIN_API_KEY="not-checked",
    )
    env.pop("ANALYST_ENV_URL", None)
    return subprocess.run(
        [str(bin_dir / argv[0]), *argv[1:]],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env=env,
    )


def vf_eval(bin_dir: Path, url: str, standin: StandIn, out: Path, *flags: str) -> list[dict]:
    """``vf-eval`` of the package's tasks on ``url`` (``flags`` narrow them) with the
    ``null`` harness and the stand-in model; the episodes it recorded."""
    proc = verifiers_cli(
        bin_dir,
        "vf-eval",
        "analyst-env-verifiers",
        *("--env.taskset.base-url", url, "--env.player.max-turns", "6"),
        *("--env.player.harness.id", "null", "--env.player.runtime.type", "subprocess"),
        *("--model", "standin", "--client.base-url", standin.url + "/v1"),
        *("--client.api-key-var", "STANDIN_API_KEY", "--no-push", "--rich", "None"),
        *("--run.name", "hub", "-o", str(out), *flags),
        cwd=out,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return [json.loads(line) for line in (out / "hub" / "traces.jsonl").open()]


SOLVED = {"openenv_reward": {"score": 1.0, "weight": 1.0}}


def test_vf_eval_plays_the_package_on_a_live_server_and_scores_the_servers_verdict(
    bin_dir, server, tmp_path
):
    url, train = server
    with StandIn(train[:2]) as standin:
        standin.use("json-first-right")  # the oracle on the split's first task, -1 on the second
        episodes = vf_eval(bin_dir, url, standin, tmp_path, "--env.taskset.num-tasks", "2")
        asked = standin.requests_for(train[0])
    scores = {
        e["task"]["data"]["reset"]["index"]: [t["rewards"] for t in e["traces"]] for e in episodes
    }
    assert all(e["ok"] for e in episodes), [t["errors"] for e in episodes for t in e["traces"]]
    assert scores == {0: [SOLVED], 1: [{"openenv_reward": {"score": 0.0, "weight": 1.0}}]}
    # the file listing came back as an observation before the final answer
    assert len(asked) == 1 + len(train[0].oracle_steps) + 1
    first = json.loads(asked[0]["messages"][-1]["content"])
    assert "final_answer" in [t["name"] for t in first["action_schema"]["available_tools"]]
    listing = json.loads(asked[1]["messages"][-1]["content"])["observation"]
    assert listing["step_count"] == 1 and "sales.csv" in json.dumps(listing["result"])


def test_a_dropped_connection_fails_the_episode_and_a_retry_plays_it_afresh(
    bin_dir, server, tmp_path
):
    url, train = server
    proxy = DroppingProxy(int(url.rsplit(":", 1)[1]))

    def drop_during_the_first_model_turn() -> None:
        while not standin.requests:
            time.sleep(0.02)
        proxy.drop()

    try:
        with StandIn(train[:1]) as standin:
            # the first turn's first answer waits 2 s: the connection is cut meanwhile
            standin.use("json-first-right", delay_s=2.0)
            threading.Thread(target=drop_during_the_first_model_turn, daemon=True).start()
            flags = ("--env.taskset.num-tasks", "1", "--env.retries.max-retries", "1")
            (episode,) = vf_eval(bin_dir, proxy.url(), standin, tmp_path, *flags)
    finally:
        proxy.close()
    assert episode["ok"] and [t["rewards"] for t in episode["traces"]] == [SOLVED]
    dropped = [e["message"] for e in episode["errors"]]  # the failed attempt's, kept
    assert dropped and all("no close frame" in m for m in dropped), dropped
    assert proxy.connections >= 2  # the retry's fresh reset
    assert httpx.get(f"{url}/ready", timeout=10).json()["live_sessions"] == 0


def test_vf_validate_loads_the_package_and_its_tasks(bin_dir, server, tmp_path):
    url, train = server
    proc = verifiers_cli(
        bin_dir,
        "vf-validate",
        "analyst-env-verifiers",
        "--taskset.base-url",
        url,
        "--runtime.type",
        "subprocess",
        "--rich",
        "False",
        "--run.name",
        "check",
        "-o",
        str(tmp_path),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    summary = json.loads((tmp_path / "check" / "summary.json").read_text())
    assert summary["total"] == len(train) and summary["outcomes"]["error"] == 0


LOAD = r"""
import json, sys
from analyst_env_verifiers import load_environment
out = []
for args in json.loads(sys.argv[1]):
    try:
        env = load_environment(**args)
        assert type(env).__name__ == "OpenEnvEnv", env  # the env that steps the server
        out.append([[t.data.base_url, t.data.reset] for t in env.taskset.load()])
    except Exception as exc:
        out.append(str(exc))
print(json.dumps(out))
"""


def load_tasks(bin_dir: Path, *configs: dict) -> list:
    """The package's ``load_environment`` in the verifiers venv, once per config: each
    task's server and reset, or the error's message."""
    proc = subprocess.run(
        [str(bin_dir / "python"), "-c", LOAD, json.dumps(configs)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
        env={k: v for k, v in os.environ.items() if k != "ANALYST_ENV_URL"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_replicas_are_dealt_the_split_in_turn_task_ids_are_played_and_no_url_is_named(
    bin_dir, server
):
    url, train = server
    other = url.replace("127.0.0.1", "localhost")  # a second name for the same server
    spread, chosen, given, no_url, docker = load_tasks(
        bin_dir,
        {"base_url": f"{url}/, {other}", "seed": 3},
        {"base_url": url, "task_ids": ["tiny-excel"]},
        {"base_url": url, "resets": [{"task_id": "tiny-csv", "episode_id": "e1"}]},
        {"split": "train"},
        {"base_url": url, "use_docker": True},
    )
    assert given == [[url, {"task_id": "tiny-csv", "episode_id": "e1"}]]
    assert no_url.startswith("no analyst_env server: pass --env.taskset.base-url"), no_url
    assert "analyst_env runs as a server: give base_url, not env, use_docker" in docker
    assert spread == [
        [[url, other][i % 2], {"split": "train", "index": i, "seed": 3}] for i in range(len(train))
    ]
    assert chosen == [[url, {"task_id": "tiny-excel"}]]


def test_a_server_that_wants_a_token_stops_loading_with_the_reason(bin_dir, settings, runtime):
    app = build_app(settings.model_copy(update={"token": "s3cret"}), runtime=runtime)
    with BackgroundServer(app) as url:
        (error,) = load_tasks(bin_dir, {"base_url": url})
    assert error.startswith(f"the analyst_env server at {url} requires a bearer token"), error
