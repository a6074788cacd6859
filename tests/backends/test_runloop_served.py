"""``ANALYST_ENV_BACKEND=runloop analyst-env serve`` end to end, against the fake Runloop API.

The server is a real child process with the unmodified SDK, configured only by the
SDK's own variables (``RUNLOOP_API_KEY``, ``RUNLOOP_BASE_URL``); one episode goes
through the WebSocket protocol and is scored by the oracle's answer, like the live
test in ``tests/deploy/test_remote_backends_live.py``.
"""

from __future__ import annotations

import httpx
import pytest
from server.oracle_episode import assert_oracle_episode_scores
from server.serve_process import ServeProcess

pytestmark = pytest.mark.live


def test_a_served_episode_runs_and_scores_on_the_runloop_backend(runloop_api, tmp_path):
    before = set(runloop_api.devboxes)
    env = {
        "ANALYST_ENV_BACKEND": "runloop",
        "RUNLOOP_API_KEY": runloop_api.api_key,
        "RUNLOOP_BASE_URL": runloop_api.base_url,
    }
    with ServeProcess(tmp_path, env=env, startup_timeout_s=180) as server:
        health = httpx.get(f"{server.url}/health", timeout=30).json()
        assert health["sandbox"]["backend"] == "runloop"
        assert_oracle_episode_scores(server.url, timeout_s=180)
        metrics = httpx.get(f"{server.url}/metrics", timeout=30).text
    assert 'analyst_env_sandbox_failures_total{stage="reset"} 0.0' in metrics
    assert set(runloop_api.devboxes) - before, "the server created no devbox on the fake API"


@pytest.mark.parametrize("key", ["", "wrong-key"])
def test_serve_refuses_to_start_without_usable_runloop_credentials(runloop_api, tmp_path, key):
    env = {
        "ANALYST_ENV_BACKEND": "runloop",
        "RUNLOOP_API_KEY": key,
        "RUNLOOP_BASE_URL": runloop_api.base_url,
    }
    with pytest.raises(RuntimeError, match="exited with 2") as failed:
        with ServeProcess(tmp_path, env=env, startup_timeout_s=120):
            pass
    expected = "set RUNLOOP_API_KEY" if not key else "refused the request"
    assert expected in str(failed.value) and "Traceback" not in str(failed.value)
