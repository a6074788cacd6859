"""/envs, the CLI and episode binding on a live server (uvicorn on a loopback port).

One server, one story: an environment is created through REST while its package index
holds the build in ``building``; a bound reset is refused with the exact message; the
CLI follows the build to ``ready``; a bound episode imports the package; deleting it
makes the task fall back to the default image with a warning. Bad inputs get clear
errors and leave the server working.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest
import websockets
from recipes.pkgindex import TINY, TINY_VALUE, PackageIndex
from support import code_step, make_tiny_dataset

from analyst_env.server.app import build_app
from analyst_env.server.local_server import BackgroundServer
from analyst_env.server.runtime import Runtime
from analyst_env.server.settings import Settings
from analyst_env.task_format import Dataset

pytestmark = pytest.mark.live
REFUSAL = "Sandbox environment image is not ready (build status: {})"


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    with PackageIndex(tmp_path_factory.mktemp("gated-index")) as idx:
        idx.add("tinypkg-recipes", "1.0.0", {f"{TINY}/__init__.py": f"VALUE = {TINY_VALUE}\n"})
        yield idx


@pytest.fixture(scope="module")
def runtime_and_url(tmp_path_factory):
    state = Path.home() / ".cache" / "analyst_env-tests" / uuid.uuid4().hex
    tiny = make_tiny_dataset(tmp_path_factory.mktemp("tiny-envs"))
    csv = next(t for t in tiny.tasks if t.id == "tiny-csv")
    bound = csv.model_copy(update={"id": "tiny-bound", "image": "bound-env"})
    settings = Settings(
        state_dir=str(state), standbys=1, cell_timeout_s=20, max_sessions=8, allow_builds=True
    )
    runtime = Runtime(settings, datasets=[Dataset(name="tiny-envs", tasks=[csv, bound])])
    try:
        with BackgroundServer(build_app(settings, runtime=runtime)) as url:
            yield runtime, url
    finally:
        runtime.close()
        shutil.rmtree(state, ignore_errors=True)


@pytest.fixture(scope="module")
def server(runtime_and_url):
    return runtime_and_url[1]


def ws_url(url: str) -> str:
    return url.replace("http://", "ws://") + "/ws"


async def frame(ws, message: dict) -> dict:
    await ws.send(json.dumps(message))
    return json.loads(await ws.recv())


def reset_and_run(url: str, reset: dict, source: str) -> tuple[dict, dict | None]:
    async def main():
        async with websockets.connect(ws_url(url), max_size=None) as ws:
            first = await frame(ws, {"type": "reset", "data": reset})
            if first["type"] == "error":
                return first, None
            return first, await frame(ws, code_step(source))

    return asyncio.run(main())


def metadata(reply: dict) -> dict:
    data = reply["data"]
    return data.get("metadata") or data["observation"].get("metadata") or {}


def cli(url: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "analyst_env.cli", "envs", *args, "--url", url],
        capture_output=True,
        text=True,
        timeout=300,
        cwd="/",
    )


def follow_build_then_open(url: str, name: str, index_open) -> subprocess.CompletedProcess:
    """``envs build NAME`` following a build in progress: the index that the build waits on
    opens only once the command shows its progress bar (opened earlier, a fast build is
    over before the command asks, and it reports the image as already built)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "analyst_env.cli", "envs", "build", name, "--url", url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd="/",
    )
    seen = bytearray()

    def read_stderr() -> None:
        assert proc.stderr is not None
        while chunk := os.read(proc.stderr.fileno(), 4096):
            seen.extend(chunk)
            if f"building {name}".encode() in seen:
                index_open.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        proc.wait(timeout=300)
    finally:
        index_open.set()
        if proc.poll() is None:
            proc.kill()
    reader.join(10)
    assert proc.stdout is not None
    return subprocess.CompletedProcess(
        proc.args, proc.returncode, proc.stdout.read().decode(), bytes(seen).decode()
    )


def wait_status(url: str, name: str, timeout_s: float = 300) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        status = httpx.get(f"{url}/envs/{name}/status").json()
        if status["status"] in ("ready", "failed") or time.monotonic() > deadline:
            return status
        time.sleep(0.3)


def test_create_refuse_while_building_build_bind_delete(runtime_and_url, index):
    runtime, url = runtime_and_url
    index.open.clear()  # the build now waits on the index
    created = httpx.post(
        f"{url}/envs",
        json={
            "name": "bound-env",
            "description": "tiny package",
            "pip": "tinypkg-recipes==1.0.0",
            "pip_index_url": index.url,
            "preload": TINY,
        },
    )
    assert created.status_code == 201, created.text
    assert created.json()["status"] == "building" and created.json()["recipe"]["pip"] == [
        "tinypkg-recipes==1.0.0"
    ]
    listed = httpx.get(f"{url}/envs").json()["environments"]
    entry = next(e for e in listed if e["name"] == "bound-env")
    assert set(entry) >= {"name", "description", "hash", "status", "progress", "elapsed_s", "error"}
    assert entry["status"] == "building" and 0 <= entry["progress"] < 1 and entry["elapsed_s"] >= 0

    refused, _ = reset_and_run(url, {"task_id": "tiny-bound"}, "")
    assert refused["type"] == "error" and refused["data"]["message"] == REFUSAL.format("building")
    by_option, _ = reset_and_run(url, {"task_id": "tiny-csv", "environment": "bound-env"}, "")
    assert by_option["data"]["message"] == REFUSAL.format("building")

    built = follow_build_then_open(url, "bound-env", index.open)
    assert built.returncode == 0, built.stderr
    assert (
        "bound-env: ready in" in built.stdout and "building bound-env" in built.stderr
    )  # the progress bar
    assert "ready" in cli(url, "list").stdout

    first, step = reset_and_run(
        url, {"task_id": "tiny-bound"}, f"import {TINY}; print({TINY}.VALUE)"
    )
    assert first["type"] == "observation", first
    assert metadata(first).get("environment") == "bound-env"
    assert step["data"]["observation"]["result"]["data"].strip() == str(TINY_VALUE)
    _, plain = reset_and_run(url, {"task_id": "tiny-csv"}, f"import {TINY}")
    assert "ModuleNotFoundError" in json.dumps(plain["data"]["observation"])

    shown = cli(url, "show", "bound-env", "--log")
    assert (
        shown.returncode == 0
        and "pip: tinypkg-recipes==1.0.0" in shown.stdout
        and "ready in" in shown.stdout
    )
    deleted = cli(url, "delete", "bound-env")
    assert deleted.returncode == 0, deleted.stderr
    fallback, step = reset_and_run(url, {"task_id": "tiny-bound"}, f"import {TINY}")
    assert fallback["type"] == "observation"
    assert "'bound-env' was deleted" in metadata(fallback)["warning"]
    assert "ModuleNotFoundError" in json.dumps(step["data"]["observation"])
    # No environment names the image any more: the backend stops its zygote (episodes all ended).
    deadline = time.monotonic() + 30
    while (
        any(i.startswith("env-") for i in runtime.backend.running_images())
        and time.monotonic() < deadline
    ):
        time.sleep(0.1)
    assert runtime.backend.running_images() == ["default"]


def test_a_misspelled_package_fails_with_the_installer_error(server, index):
    url = server
    made = cli(url, "create", "typo-env", "--pip", "tinypgk-recipes", "--pip-index-url", index.url)
    assert made.returncode == 1
    assert "tinypgk-recipes was not found in the package registry" in made.stderr
    status = httpx.get(f"{url}/envs/typo-env/status").json()
    assert status["status"] == "failed" and "tinypgk-recipes" in status["error"]
    assert "FAILED" in httpx.get(f"{url}/envs/typo-env/logs").json()["log"]
    refused, _ = reset_and_run(url, {"task_id": "tiny-csv", "environment": "typo-env"}, "")
    assert refused["data"]["message"] == REFUSAL.format("failed")
    # Fixing the recipe rebuilds it.
    fixed = httpx.patch(f"{url}/envs/typo-env", json={"pip": "tinypkg-recipes"})
    assert fixed.status_code == 200 and fixed.json()["rebuild"] is True
    assert wait_status(url, "typo-env")["status"] == "ready"


def test_templates_are_copied(server):
    url = server
    templates = httpx.get(f"{url}/envs/templates").json()["templates"]
    assert {t["name"] for t in templates} == {
        "data-science",
        "data-engineering",
        "web-scraping",
        "documents",
    }
    made = httpx.post(f"{url}/envs", json={"template": "web-scraping", "name": "scraper"})
    assert made.status_code == 201 and made.json()["recipe"]["pip"] == [
        "requests",
        "httpx",
        "beautifulsoup4",
        "lxml",
    ]
    httpx.patch(f"{url}/envs/scraper", json={"pip": "requests"})
    again = httpx.get(f"{url}/envs/templates").json()["templates"]
    assert next(t for t in again if t["name"] == "web-scraping")["pip"] == [
        "requests",
        "httpx",
        "beautifulsoup4",
        "lxml",
    ]
    assert httpx.delete(f"{url}/envs/scraper").json() == {"deleted": "scraper"}


BAD = [
    (
        "POST",
        "/envs",
        {"name": "x", "pip_index_url": "file:///etc"},
        422,
        "pip_index_url: must be an http:// or https://",
    ),
    ("POST", "/envs", {"name": "Bad Name"}, 422, "name: 'Bad Name' must be"),
    ("POST", "/envs", {"name": "x", "npm": "Bad!"}, 422, "npm: 'Bad!' is not an npm package"),
    ("POST", "/envs", {"name": "default"}, 409, "built-in image"),
    ("POST", "/envs", {"name": "x", "template": "nope"}, 404, "no template named 'nope'"),
    ("POST", "/envs", {"pip": "pandas"}, 422, "name: a sandbox environment needs a name"),
    ("POST", "/envs", ["not", "an", "object"], 422, None),
    ("GET", "/envs/nope", None, 404, "no sandbox environment named 'nope'"),
    ("PATCH", "/envs/nope", {"pip": "x"}, 404, "no sandbox environment named 'nope'"),
    ("DELETE", "/envs/nope", None, 404, "no sandbox environment named 'nope'"),
    ("POST", "/envs/nope/build", None, 404, "no sandbox environment named 'nope'"),
    ("GET", "/envs/nope/logs", None, 404, "no sandbox environment named 'nope'"),
]


@pytest.mark.parametrize(
    "method, path, body, code_, detail", BAD, ids=[f"{m} {p} {c}" for m, p, _, c, _ in BAD]
)
def test_bad_requests_get_clear_errors_and_break_nothing(server, method, path, body, code_, detail):
    url = server
    response = httpx.request(method, url + path, json=body)
    assert response.status_code == code_, response.text
    if detail:
        assert detail in response.json()["detail"]
    assert httpx.get(f"{url}/envs").status_code == 200
    first, step = reset_and_run(url, {"task_id": "tiny-csv"}, "print('still serving')")
    assert step["data"]["observation"]["result"]["data"].strip() == "still serving"


def test_unknown_environment_option_is_a_clear_reset_error(server):
    refused, _ = reset_and_run(server, {"task_id": "tiny-csv", "environment": "nope"}, "")
    assert (
        refused["type"] == "error"
        and "no sandbox environment named 'nope'" in refused["data"]["message"]
    )


def test_cli_errors_are_clear(server):
    missing = cli(server, "show", "nope")
    assert (
        missing.returncode == 1
        and "no sandbox environment named 'nope'; environments:" in missing.stderr
    )
    down = subprocess.run(
        [sys.executable, "-m", "analyst_env.cli", "envs", "list", "--url", "http://127.0.0.1:9"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )
    assert down.returncode == 2 and "cannot reach the server" in down.stderr


def test_envs_routes_honour_the_bearer_token(runtime_and_url):
    runtime, _ = runtime_and_url
    settings = runtime.settings.model_copy(update={"token": "s3cret"})
    with BackgroundServer(build_app(settings, runtime=runtime)) as url:
        assert httpx.get(f"{url}/envs").status_code == 401
        assert httpx.post(f"{url}/envs", json={"name": "sneaky"}).status_code == 401
        ok = httpx.get(f"{url}/envs", headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200 and "sneaky" not in ok.text
        listed = subprocess.run(
            [
                sys.executable,
                "-m",
                "analyst_env.cli",
                "envs",
                "list",
                "--url",
                url,
                "--token",
                "s3cret",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            cwd="/",
        )
        assert listed.returncode == 0 and "typo-env" in listed.stdout


def test_cli_creates_from_a_toml_file(server, index, tmp_path):
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(
        f'name = "ignored"\ndescription = "from a file"\npip = "tinypkg-recipes"\n'
        f'pip_index_url = "{index.url}"\n'
    )
    made = cli(
        server,
        "create",
        "from-file",
        "--file",
        str(recipe),
        "--description",
        "flag wins",
        "--no-wait",
    )
    assert made.returncode == 0, made.stderr
    env = httpx.get(f"{server}/envs/from-file").json()
    assert env["recipe"]["pip"] == ["tinypkg-recipes"] and env["description"] == "flag wins"
    assert wait_status(server, "from-file")["status"] == "ready"
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\nnpm_registry = "file:///srv"\n')
    refused = cli(server, "create", "bad", "--file", str(bad))
    assert (
        refused.returncode == 1
        and "npm_registry: must be an http:// or https:// URL" in refused.stderr
    )
