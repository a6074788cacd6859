"""What the trainer integration tests share: a live server per module and the stand-in model.

Each test module gets its own server so that its live-session count (``/ready``), which the
tests use to prove every episode was closed, is that module's alone. A dropped episode is
parked for 10 s (``resume_grace_s``), long enough for the resume tests to reconnect and
short enough that a test waiting for sessions to close is not held up.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from analyst_env.server.app import build_app
from analyst_env.server.local_server import BackgroundServer
from analyst_env.server.runtime import Runtime

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "eval"))
from openai_standin import StandIn  # noqa: E402


@pytest.fixture(scope="module")
def server(settings, tiny_dataset, tmp_path_factory, request):
    """The URL of a server of this module's own, on the tiny dataset."""
    state = str(tmp_path_factory.mktemp(f"{request.module.__name__}-state"))
    cfg = settings.model_copy(update={"state_dir": state, "resume_grace_s": 10.0})
    runtime = Runtime(cfg, datasets=[tiny_dataset])
    try:
        with BackgroundServer(build_app(cfg, runtime=runtime)) as url:
            yield url
    finally:
        runtime.close()


@pytest.fixture(scope="module")
def standin(tiny_dataset):
    """The stand-in OpenAI-compatible model (tests/eval/openai_standin.py) for the tiny tasks."""
    with StandIn(list(tiny_dataset.tasks)) as model_server:
        yield model_server
