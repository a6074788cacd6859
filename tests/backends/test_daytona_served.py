"""``ANALYST_ENV_BACKEND=daytona analyst-env serve`` end to end, against the fake Daytona API.

The server is a real child process with the unmodified SDK, configured only by the
SDK's own variables (``DAYTONA_API_KEY``, ``DAYTONA_API_URL``); one episode goes
through the WebSocket protocol and is scored by the oracle's answer, like the live
test in ``tests/deploy/test_remote_backends_live.py``.
"""

from __future__ import annotations

import fake_daytona
import httpx
import pytest
from server.oracle_episode import assert_oracle_episode_scores
from server.serve_process import ServeProcess

pytestmark = pytest.mark.live


def test_a_served_episode_runs_and_scores_on_the_daytona_backend(daytona_api, tmp_path):
    env = {
        "ANALYST_ENV_BACKEND": "daytona",
        "DAYTONA_API_KEY": daytona_api.api_key,
        "DAYTONA_API_URL": daytona_api.api_url,
    }
    with ServeProcess(tmp_path, env=env, startup_timeout_s=180) as server:
        health = httpx.get(f"{server.url}/health", timeout=30).json()
        assert health["sandbox"]["backend"] == "daytona"
        assert_oracle_episode_scores(server.url, timeout_s=180)
        metrics = httpx.get(f"{server.url}/metrics", timeout=30).text
    assert 'analyst_env_sandbox_failures_total{stage="reset"} 0.0' in metrics
    served = {sb.id for sb in daytona_api.sandboxes.values() if sb.body["labels"]}
    assert served, "the server created no sandbox on the fake Daytona API"


@pytest.mark.parametrize("key", ["", "wrong-key"])
def test_serve_refuses_to_start_without_usable_daytona_credentials(daytona_api, tmp_path, key):
    env = {
        "ANALYST_ENV_BACKEND": "daytona",
        "DAYTONA_API_KEY": key,
        "DAYTONA_API_URL": daytona_api.api_url,
    }
    with pytest.raises(RuntimeError, match="exited with 2") as failed:
        with ServeProcess(tmp_path, env=env, startup_timeout_s=120):
            pass
    expected = "set DAYTONA_API_KEY" if not key else "refused the request"
    assert expected in str(failed.value) and "Traceback" not in str(failed.value)


def test_serve_refuses_with_one_line_when_the_backend_cannot_warm_up(tmp_path):
    """The default image's snapshot fails to build: ``serve`` names that in one line and exits
    2 before serving, as its other start refusals do (not the app's startup traceback)."""
    pytest.importorskip("daytona", reason="the daytona extra is not installed")
    with fake_daytona.FakeDaytona() as fake:  # its own: the shared one has the snapshot built
        fake.faults.build_failure = "pip install failed: no matching distribution"
        env = {
            "ANALYST_ENV_BACKEND": "daytona",
            "DAYTONA_API_KEY": fake.api_key,
            "DAYTONA_API_URL": fake.api_url,
        }
        with pytest.raises(RuntimeError, match="exited with 2") as failed:
            with ServeProcess(tmp_path, env=env, startup_timeout_s=120):
                pass
    log = (tmp_path / "serve.log").read_text()
    refusal = [line for line in log.splitlines() if line.startswith("analyst-env: error:")]
    assert len(refusal) == 1, log
    assert "daytona sandbox backend could not warm up image 'default'" in refusal[0]
    assert "no matching distribution" in refusal[0]
    assert "Traceback" not in str(failed.value) and "Traceback" not in log
