"""Live: ``/envs`` under ``serve --workers 2``: one set of environments, whichever worker answers.

Each worker is a whole server with its own ``EnvironmentService`` over the one state
directory. An environment created through one worker must be listed, followed,
bound by the other; a build asked for twice (once per worker) while it runs must
run once, and a name taken on one worker is taken on the other; a deletion through
one worker must reach the other's resets (they fall back to the default image).
Requests are pinned to a worker by keeping one HTTP connection per worker (the
kernel hands a connection to one worker for its whole life), told apart by the
slot-uid range each worker's ``/sandbox`` reports.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import sqlite3
import uuid
from pathlib import Path

import httpx
import pytest
import websockets
from deploy.polling import wait_for
from recipes.pkgindex import TINY, TINY_VALUE, PackageIndex
from server.serve_process import ServeProcess
from support import code_step

pytestmark = pytest.mark.live

TASK = "starter-sales-000"
NAME = "shared-env"


def one_client_per_worker(url: str, workers: int = 2, tries: int = 60) -> list[httpx.Client]:
    """Keep-alive clients, one connected to each worker (told apart by their uid ranges)."""
    by_worker: dict[str, httpx.Client] = {}
    for _ in range(tries):
        client = httpx.Client(base_url=url, timeout=30)
        uid_range = client.get("/sandbox").json()["protections"].get("uid_range")
        if uid_range is None:
            client.close()
            pytest.skip("the workers cannot be told apart without per-slot uid ranges")
        if uid_range in by_worker or len(by_worker) == workers:
            client.close()
        else:
            by_worker[uid_range] = client
        if len(by_worker) == workers:
            return list(by_worker.values())
    raise AssertionError(f"only {len(by_worker)} of {workers} workers answered {tries} connections")


def resets_with_environment(url: str, count: int, source: str | None) -> list[tuple[dict, dict]]:
    """``count`` episodes on new connections (spread over the workers by the kernel), each reset
    with the ``environment`` option and, if it started, running ``source``."""

    async def one() -> tuple[dict, dict]:
        ws_url = url.replace("http://", "ws://") + "/ws"
        async with websockets.connect(ws_url, open_timeout=60) as ws:
            reset = {"type": "reset", "data": {"task_id": TASK, "environment": NAME}}
            await ws.send(json.dumps(reset))
            first = json.loads(await asyncio.wait_for(ws.recv(), 120))
            if first["type"] != "observation" or source is None:
                return first, {}
            await ws.send(json.dumps(code_step(source)))
            return first, json.loads(await asyncio.wait_for(ws.recv(), 60))

    async def main():
        return [await one() for _ in range(count)]

    return asyncio.run(main())


def build_attempts(state: Path) -> list[int]:
    with sqlite3.connect(state / "envs" / "builds.sqlite") as db:
        return [row[0] for row in db.execute("SELECT attempts FROM builds")]


@pytest.fixture
def state_dir():
    # Outside /tmp: a baked image under /tmp is invisible to the local sandbox's kernels.
    path = Path.home() / ".cache" / "analyst_env-tests" / uuid.uuid4().hex
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_an_environment_made_on_one_worker_is_seen_built_once_and_bound_on_both(
    tmp_path, state_dir
):
    with PackageIndex(tmp_path / "index") as index:
        index.add("tinypkg-recipes", "1.0.0", {f"{TINY}/__init__.py": f"VALUE = {TINY_VALUE}\n"})
        index.open.clear()  # the build waits on the index until the test opens it
        with ServeProcess(
            tmp_path,
            "--workers",
            "2",
            "--allow-builds",
            "--log-level",
            "warning",
            env={"ANALYST_ENV_STATE_DIR": str(state_dir)},
        ) as server:
            a, b = one_client_per_worker(server.url)
            recipe = {"name": NAME, "pip": "tinypkg-recipes==1.0.0", "pip_index_url": index.url}
            created = a.post("/envs", json={**recipe, "preload": TINY})
            assert created.status_code == 201, created.text

            seen = b.get(f"/envs/{NAME}")
            assert seen.status_code == 200, seen.text
            assert seen.json()["status"] == "building"
            assert NAME in [e["name"] for e in b.get("/envs").json()["environments"]]
            again = b.post(f"/envs/{NAME}/build")  # the other worker is building it already
            assert again.status_code == 200 and again.json()["status"] == "building", again.text
            taken = b.post("/envs", json={**recipe, "preload": TINY})
            assert taken.status_code == 409, taken.text

            index.open.set()
            wait_for(
                lambda: b.get(f"/envs/{NAME}/status").json()["status"] == "ready",
                300,
                f"the build never became ready: {b.get(f'/envs/{NAME}').text}",
            )
            assert a.get(f"/envs/{NAME}/status").json()["status"] == "ready"
            assert build_attempts(state_dir) == [1], "the two workers built the image twice"

            for first, step in resets_with_environment(
                server.url, 6, f"import {TINY}; print({TINY}.VALUE)"
            ):
                assert first["type"] == "observation", first
                assert step["data"]["observation"]["result"]["data"].strip() == str(TINY_VALUE)

            assert a.delete(f"/envs/{NAME}").status_code == 200
            assert b.get(f"/envs/{NAME}").status_code == 404
            for first, step in resets_with_environment(server.url, 6, f"import {TINY}"):
                assert first["type"] == "observation", first
                warning = first["data"]["observation"]["metadata"]["warning"]
                assert f"{NAME!r} was deleted" in warning, first
                assert "ModuleNotFoundError" in json.dumps(step["data"]["observation"])

            for client in (a, b):
                client.close()
            server.proc.send_signal(signal.SIGTERM)
            assert server.proc.wait(timeout=60) == 0, server.log()[-3000:]
            assert "Traceback" not in server.log(), server.log()[-3000:]
