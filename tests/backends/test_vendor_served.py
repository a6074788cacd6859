"""``ANALYST_ENV_BACKEND=<vendor> analyst-env serve`` end to end, against each vendor's fake API.

The server is a real child process with the vendor's unmodified SDK, configured only by
the SDK's own variables (``DAYTONA_API_KEY``/``DAYTONA_API_URL``,
``RUNLOOP_API_KEY``/``RUNLOOP_BASE_URL``, ``PRIME_API_KEY``/``PRIME_API_BASE_URL``,
``CWSANDBOX_API_KEY``/``CWSANDBOX_BASE_URL``); one episode goes through the WebSocket
protocol and is scored by the oracle's answer (``server/oracle_episode.py``), like the
live test in ``tests/deploy/test_remote_backends_live.py``. One table row per vendor, so
every vendor is asked the same.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

import fake_daytona
import httpx
import pytest
from server.oracle_episode import assert_oracle_episode_scores
from server.serve_process import ServeProcess

pytestmark = pytest.mark.live


@dataclasses.dataclass(frozen=True)
class Vendor:
    """How ``serve`` reaches one vendor's fake API, and what it made there."""

    fixture: str
    key_variable: str
    url_variable: str
    url: Callable[[Any], str]
    made: Callable[[Any], set[str]]
    """The ids of the sandboxes (devboxes ...) the fake holds, or made."""
    extra: Callable[[], dict[str, str]] = dict
    """More of the server's environment (the backend's own settings, where the SDK is)."""

    def env(self, fake: Any, key: str | None = None) -> dict[str, str]:
        return {
            "ANALYST_ENV_BACKEND": self.fixture.removesuffix("_api"),
            self.key_variable: fake.api_key if key is None else key,
            self.url_variable: self.url(fake),
            # Making the SDK's client alone has taken 9 s on a loaded 2-core host (imports).
            "ANALYST_ENV_BACKEND_CONNECT_TIMEOUT_S": "60",
            **self.extra(),
        }


def _prime_env() -> dict[str, str]:
    """The server finds ``prime-sandboxes`` where the tests do (``.venv/prime``, after its own
    packages: prime_sdk.py) and keeps the SDK's token cache in the test's ``HOME``."""
    from prime_sdk import FOLDER

    path = [p for p in (os.environ.get("PYTHONPATH"), os.path.realpath(FOLDER)) if p]
    return {"PYTHONPATH": os.pathsep.join(path), "HOME": os.environ["HOME"]}


VENDORS = {
    "daytona": Vendor(
        "daytona_api",
        "DAYTONA_API_KEY",
        "DAYTONA_API_URL",
        lambda fake: fake.api_url,
        lambda fake: {sb.id for sb in fake.sandboxes.values() if sb.body["labels"]},
    ),
    "runloop": Vendor(
        "runloop_api",
        "RUNLOOP_API_KEY",
        "RUNLOOP_BASE_URL",
        lambda fake: fake.base_url,
        lambda fake: set(fake.devboxes),
    ),
    "prime": Vendor(
        "prime_api",
        "PRIME_API_KEY",
        "PRIME_API_BASE_URL",
        lambda fake: fake.base_url,
        lambda fake: set(fake.sandboxes),
        _prime_env,
    ),
    "coreweave": Vendor(
        "coreweave_api",
        "CWSANDBOX_API_KEY",
        "CWSANDBOX_BASE_URL",
        lambda fake: fake.base_url,
        # the fake runs each exec as a local process: any reference names the default image
        lambda fake: {str(n) for n, _ in enumerate(fake.created())},
        lambda: {"ANALYST_ENV_COREWEAVE_IMAGE": "registry.example/analyst-env-runner"},
    ),
}


@pytest.mark.parametrize("name", sorted(VENDORS))
def test_a_served_episode_runs_and_scores_on_the_vendor_backend(name, request, tmp_path):
    vendor = VENDORS[name]
    fake = request.getfixturevalue(vendor.fixture)
    before = vendor.made(fake)
    with ServeProcess(tmp_path, env=vendor.env(fake), startup_timeout_s=180) as server:
        health = httpx.get(f"{server.url}/health", timeout=30).json()
        assert health["sandbox"]["backend"] == name
        # The vendor owns isolation: nothing is claimed for it (no protections report).
        assert health["sandbox"]["isolation"] is None and "unconfined" not in health["sandbox"]
        shown = httpx.get(f"{server.url}/sandbox", timeout=30).json()
        assert shown == {"backend": name, "protections": {}}
        metadata = httpx.get(f"{server.url}/metadata", timeout=30).json()
        assert "Sandbox (" not in metadata["description"]
        assert_oracle_episode_scores(server.url, timeout_s=180)
        metrics = httpx.get(f"{server.url}/metrics", timeout=30).text
    assert 'analyst_env_sandbox_failures_total{stage="reset"} 0.0' in metrics
    assert vendor.made(fake) - before, f"the server made no sandbox on the fake {name} API"


@pytest.mark.parametrize("key", ["", "wrong-key"])
@pytest.mark.parametrize("name", sorted(VENDORS))
def test_serve_refuses_to_start_without_usable_credentials(name, key, request, tmp_path):
    vendor = VENDORS[name]
    fake = request.getfixturevalue(vendor.fixture)
    with pytest.raises(RuntimeError, match="exited with 2") as failed:
        with ServeProcess(tmp_path, env=vendor.env(fake, key), startup_timeout_s=120):
            pass
    expected = f"set {vendor.key_variable}" if not key else "refused the request"
    assert expected in str(failed.value) and "Traceback" not in str(failed.value)


def test_serve_refuses_with_one_line_when_the_backend_cannot_warm_up(tmp_path):
    """The default image's snapshot fails to build: ``serve`` names that in one line and exits
    2 before any episode runs (``/health`` may have answered: the warm-up is not on its
    path), as its other start refusals do (not the app's startup traceback)."""
    pytest.importorskip("daytona", reason="the daytona extra is not installed")
    with fake_daytona.FakeDaytona() as fake:  # its own: the shared one has the snapshot built
        fake.faults.build_failure = "pip install failed: no matching distribution"
        with pytest.raises(RuntimeError, match="exited with 2") as failed:
            with ServeProcess(tmp_path, env=VENDORS["daytona"].env(fake), startup_timeout_s=120):
                pass
    log = (tmp_path / "serve.log").read_text()
    refusal = [line for line in log.splitlines() if line.startswith("analyst-env: error:")]
    assert len(refusal) == 1, log
    assert "daytona sandbox backend could not warm up image 'default'" in refusal[0]
    assert "no matching distribution" in refusal[0]
    assert "Traceback" not in str(failed.value) and "Traceback" not in log
