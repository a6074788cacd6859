"""Live: mutating /envs routes need a token or --allow-builds (issue 11).

A build installs packages picked by whoever calls ``POST /envs``. On a server with
neither a token nor ``allow_builds`` every mutating route answers 403 saying how to
enable builds, the read-only ones keep answering, and nothing is created; with a
token, the token is what lets a caller build.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import httpx
import pytest
from support import make_tiny_dataset

from analyst_env.server.app import build_app
from analyst_env.server.local_server import BackgroundServer
from analyst_env.server.runtime import Runtime
from analyst_env.server.settings import Settings

pytestmark = pytest.mark.live
TOKEN = "guard-token-1"


@pytest.fixture
def serve(tmp_path):
    state = Path.home() / ".cache" / "analyst_env-tests" / uuid.uuid4().hex
    runtimes = []
    tiny = make_tiny_dataset(tmp_path / "tiny")

    def start(**overrides):
        settings = Settings(state_dir=str(state), standbys=0, **overrides)
        runtime = Runtime(settings, datasets=[tiny])
        runtimes.append(runtime)
        return BackgroundServer(build_app(settings, runtime=runtime))

    yield start
    for runtime in runtimes:
        runtime.close()
    shutil.rmtree(state, ignore_errors=True)


def test_without_a_token_or_allow_builds_every_mutating_route_is_refused(serve):
    with serve() as url:
        calls = [
            ("POST", "/envs", {"name": "x"}),
            ("PATCH", "/envs/x", {"description": "d"}),
            ("PUT", "/envs/x", {"description": "d"}),
            ("DELETE", "/envs/x", None),
            ("POST", "/envs/x/build", None),
        ]
        for method, path, body in calls:
            response = httpx.request(method, f"{url}{path}", json=body)
            assert response.status_code == 403, (method, path, response.text)
            assert (
                "--allow-builds" in response.json()["detail"]
                and "--token" in response.json()["detail"]
            )
        assert httpx.get(f"{url}/envs").json() == {"environments": []}
        assert httpx.get(f"{url}/envs/templates").status_code == 200
        assert httpx.get(f"{url}/health").status_code == 200


def test_a_token_or_allow_builds_lets_a_caller_build(serve):
    with serve(token=TOKEN) as url:
        assert httpx.post(f"{url}/envs", json={"name": "t"}).status_code == 401
        auth = {"Authorization": f"Bearer {TOKEN}"}
        assert httpx.post(f"{url}/envs", json={"name": "t"}, headers=auth).status_code == 201
        assert httpx.delete(f"{url}/envs/t", headers=auth).status_code == 200
    with serve(allow_builds=True) as url:
        assert httpx.post(f"{url}/envs", json={"name": "a"}).status_code == 201
        assert httpx.delete(f"{url}/envs/a").status_code == 200
