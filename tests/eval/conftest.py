"""Fixtures of the eval tests: a real environment server and the stand-in model server.

The environment server is the real app on its own runtime (the tiny dataset,
local sandboxes) with a state directory of its own, so a test can read the
trajectories it recorded and the runs written beside them.
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from openai_standin import StandIn  # noqa: E402

from analyst_env.server.app import build_app  # noqa: E402
from analyst_env.server.local_server import BackgroundServer  # noqa: E402
from analyst_env.server.runtime import Runtime  # noqa: E402


@pytest.fixture(scope="session")
def eval_state_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("eval-state")


@pytest.fixture(scope="session")
def eval_runtime(settings, tiny_dataset, eval_state_dir):
    rt = Runtime(
        settings.model_copy(update={"state_dir": str(eval_state_dir)}), datasets=[tiny_dataset]
    )
    yield rt
    rt.close()


@pytest.fixture(scope="session")
def env_url(eval_runtime):
    with BackgroundServer(build_app(eval_runtime.settings, runtime=eval_runtime)) as url:
        yield url


@pytest.fixture(scope="session")
def eval_tasks(tiny_dataset):
    """The three plain tasks of the tiny dataset (CSV, SQLite, Excel)."""
    return [t for t in tiny_dataset.tasks if t.id in ("tiny-csv", "tiny-sqlite", "tiny-excel")]


@pytest.fixture(scope="session")
def standin_server(tiny_dataset):
    from analyst_env.datasets import load_dataset

    with StandIn([*tiny_dataset.tasks, *load_dataset("starter").tasks]) as server:
        yield server


@pytest.fixture
def standin(standin_server):
    """The stand-in, reset to the oracle script."""
    standin_server.use("oracle")
    return standin_server
