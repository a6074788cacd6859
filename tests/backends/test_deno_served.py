"""``ANALYST_ENV_BACKEND=deno analyst-env serve`` end to end, against the fake Deno APIs.

The server is a real child process with the unmodified SDK, configured only by the SDK's own
variables (``DENO_DEPLOY_TOKEN``, ``DENO_SANDBOX_ENDPOINT``, ``DENO_DEPLOY_ENDPOINT``); one
episode goes through the WebSocket protocol and is scored by the oracle's answer, like the
live test in ``tests/deploy/test_remote_backends_live.py``.
"""

from __future__ import annotations

import httpx
import pytest
from server.oracle_episode import assert_oracle_episode_scores
from server.serve_process import ServeProcess

pytestmark = pytest.mark.live


def test_a_served_episode_runs_and_scores_on_the_deno_backend(deno_api, tmp_path):
    before = len(deno_api.created)
    env = {"ANALYST_ENV_BACKEND": "deno", **deno_api.env}
    with ServeProcess(tmp_path, env=env, startup_timeout_s=180) as server:
        health = httpx.get(f"{server.url}/health", timeout=30).json()
        assert health["sandbox"]["backend"] == "deno"
        assert_oracle_episode_scores(server.url, timeout_s=180)
        metrics = httpx.get(f"{server.url}/metrics", timeout=30).text
    assert 'analyst_env_sandbox_failures_total{stage="reset"} 0.0' in metrics
    booted = [c for c in deno_api.created[before:] if c.get("allow_net") == []]
    assert booted, "the server booted no sandbox on the fake Deno API"


@pytest.mark.parametrize("token", ["", "wrong-token"])
def test_serve_refuses_to_start_without_a_usable_deno_token(deno_api, tmp_path, token):
    env = {"ANALYST_ENV_BACKEND": "deno", **deno_api.env, "DENO_DEPLOY_TOKEN": token}
    with pytest.raises(RuntimeError, match="exited with 2") as failed:
        with ServeProcess(tmp_path, env=env, startup_timeout_s=120):
            pass
    expected = "set DENO_DEPLOY_TOKEN" if not token else "refused the request"
    assert expected in str(failed.value) and "Traceback" not in str(failed.value)
