"""Live: ``/health`` does not wait for the sandbox backend's warm-up; ``/ready`` and episodes do.

Start-up leaves the local backend's zygote boot (seconds on a loaded machine) off the
path to ``/health`` (``server/lifecycle.py``, ``BackendWarmUp``). What must still hold,
with a real backend and a real uvicorn server: ``/ready`` never says ``ready`` before the
default image's zygote runs; a reset sent meanwhile gets a working kernel (it waits for
the same boot); a warm-up that fails leaves ``/ready`` at 503 ``failed`` and every reset
ended at once (``done``, status ``error``), never an episode without its confined zygote.
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
import websockets
from support import code_step

from analyst_env.datasets import load_dataset
from analyst_env.envs.local import LocalSandboxBackend
from analyst_env.server.app import build_app
from analyst_env.server.local_server import BackgroundServer
from analyst_env.server.runtime import Runtime
from analyst_env.server.settings import Settings

pytestmark = pytest.mark.live


def _runtime(backend: LocalSandboxBackend) -> Runtime:
    return Runtime(
        Settings(max_sessions=4, standbys=0), backend=backend, datasets=[load_dataset("starter")]
    )


async def _reset_and_run(url: str, source: str) -> tuple[dict, dict | None]:
    """One reset over ``/ws`` and, unless it ended the episode, one cell."""
    async with websockets.connect(url.replace("http://", "ws://") + "/ws") as ws:
        await ws.send(json.dumps({"type": "reset", "data": {"task_id": "starter-sales-000"}}))
        reset = json.loads(await ws.recv())
        if reset.get("type") == "error" or reset["data"].get("done"):
            return reset, None
        await ws.send(json.dumps(code_step(source)))
        return reset, json.loads(await ws.recv())


def test_ready_waits_for_the_zygote_and_an_early_reset_gets_a_kernel() -> None:
    backend = LocalSandboxBackend(standbys=0)
    runtime = _runtime(backend)
    try:
        with BackgroundServer(build_app(runtime.settings, runtime=runtime)) as url:
            assert httpx.get(f"{url}/health").status_code == 200
            reset, step = asyncio.run(_reset_and_run(url, "print(6 * 7)"))
            assert reset["type"] == "observation", reset
            assert step is not None and "42" in json.dumps(step), step
            deadline = time.monotonic() + 120
            while True:
                ready = httpx.get(f"{url}/ready")
                body = ready.json()
                if body["status"] == "ready":
                    assert ready.status_code == 200
                    assert "default" in backend.running_images()
                    break
                assert (ready.status_code, body["status"]) == (503, "starting"), body
                assert time.monotonic() < deadline, "the warm-up never finished"
                time.sleep(0.05)
    finally:
        runtime.close()


def test_a_failed_warm_up_leaves_ready_failed_and_ends_every_reset() -> None:
    backend = LocalSandboxBackend(standbys=0, boot_timeout_s=0.001)  # no zygote boots this fast
    runtime = _runtime(backend)
    app = build_app(runtime.settings, runtime=runtime)
    failures: list[str] = []
    app.state.warm_up.on_failure = lambda: failures.append(app.state.warm_up.error)
    try:
        with BackgroundServer(app) as url:
            deadline = time.monotonic() + 60
            while httpx.get(f"{url}/ready").json()["status"] == "starting":
                assert time.monotonic() < deadline, "the warm-up never ended"
                time.sleep(0.05)
            ready = httpx.get(f"{url}/ready")
            assert (ready.status_code, ready.json()["status"]) == (503, "failed")
            assert len(failures) == 1 and failures[0], failures
            reset, step = asyncio.run(_reset_and_run(url, "print(6 * 7)"))
            assert step is None, step  # the episode ended at its reset, with no kernel
            assert reset["data"]["done"] is True, reset
            assert reset["data"]["metadata"]["status"] == "error", reset
            assert backend.running_images() == []
    finally:
        runtime.close()
