"""The probes of tests/probes.py against a server on this machine (no container), over the protocol.

The same sandbox and gold-leak probes as tests/image/test_published_image.py, so a
regression shows without Docker too. The server serves the starter set with a token,
which is also in its environment as `analyst-env serve` would have it. Two probes are
left out here because the server shares the machine with everything else: the kill
probe (a cell's `kill -9 -1` as root, should isolation regress, would end every process
on the machine) and writes to system directories (the write probe only targets the
server's package source, task cache and state).
"""

from __future__ import annotations

import os
from pathlib import Path

import probes
import pytest

import analyst_env
from analyst_env.paths import cache_root
from analyst_env.server.app import build_app
from analyst_env.server.local_server import BackgroundServer
from analyst_env.server.runtime import Runtime
from analyst_env.server.settings import Settings

pytestmark = pytest.mark.live
TOKEN = "local-probe-token-" + os.urandom(12).hex()
LOCAL = [p for p in probes.PROBES if p is not probes.probe_server_survives_kill_attempts]


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    state = tmp_path_factory.mktemp("probe-state")
    package = str(Path(analyst_env.__file__).resolve().parent)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ANALYST_ENV_TOKEN", TOKEN)
        settings = Settings(token=TOKEN, state_dir=str(state), cell_timeout_s=30.0, max_sessions=8)
        runtime = Runtime(settings)
        try:
            with BackgroundServer(build_app(settings, runtime=runtime)) as url:
                # Something of each kind is there to be found: a recorded trajectory, the cache.
                probes.probe_episode_scores(probes.Target(url, TOKEN, [], [], []))
                port = int(url.rsplit(":", 1)[1])
                # The package's own folders: a development checkout keeps its .venv (the
                # interpreter, which kernels need) inside the package directory.
                source = [
                    os.path.join(package, d) for d in ("server", "datasets", "verifiers", "client")
                ]
                secret = [*source, str(cache_root()), str(state)]
                yield probes.Target(
                    url=url,
                    token=TOKEN,
                    secret_paths=secret,
                    listen_addresses=[("127.0.0.1", port)],
                    protected_write_dirs=secret,
                    exists_on_server=os.path.exists,
                )
        finally:
            runtime.close()


@pytest.mark.parametrize("probe", LOCAL, ids=lambda p: p.__name__.removeprefix("probe_"))
def test_probe(target, probe):
    probe(target)
