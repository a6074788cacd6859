"""Shared fixtures: the tiny dataset, and the real runtime and app serving it.

Every fixture here starts real parts: the local fork-server backend, the real
FastAPI app. Nothing is faked.
"""

from __future__ import annotations

import os
import sys

import pytest
from support import make_tiny_dataset

# The repo root is the package `analyst_env`, so its folders `datasets/` and
# `verifiers/` would shadow the PyPI packages of those names (needed by the TRL
# tests) if the root were on sys.path, as `python -m pytest` from the root puts it.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _ROOT]

# These imports must come after the sys.path cleanup above, so they resolve against the package.
from analyst_env.server.app import build_app  # noqa: E402
from analyst_env.server.environment import AnalystEnvironment  # noqa: E402
from analyst_env.server.runtime import Runtime  # noqa: E402
from analyst_env.server.settings import Settings  # noqa: E402
from analyst_env.task_format import Dataset  # noqa: E402

# The Docker engine and the published image, for the tests that run them (tests/docker_engine.py).
pytest_plugins = ["docker_engine"]


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory) -> Dataset:
    return make_tiny_dataset(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="session")
def settings() -> Settings:
    return Settings(
        cell_timeout_s=5.0, shell_timeout_s=5.0, output_limit_chars=2_000, max_sessions=40
    )


@pytest.fixture(scope="session")
def runtime(settings, tiny_dataset):
    rt = Runtime(settings, datasets=[tiny_dataset])
    yield rt
    rt.close()


@pytest.fixture
def env(runtime):
    """An ``AnalystEnvironment`` on the shared runtime, closed after the test."""
    environment = AnalystEnvironment(runtime)
    yield environment
    environment.close()


@pytest.fixture(scope="session")
def app(settings, runtime):
    return build_app(settings, runtime=runtime)


# The contributor's quick loop (`pytest -m core`, a few minutes on 2 cores): the package's own
# parts in process (scorers, datasets, the environment, the backends against their fakes, the
# unit rules). The live servers, the sandbox's containment, the browser, the image, the
# trainers and the deployments are the rest of the suite (`pytest tests/<area>`, or `pytest`).
CORE_FOLDERS = {"unit", "verifiers", "datasets", "env", "backends"}
_TESTS = os.path.dirname(os.path.abspath(__file__))


def pytest_collection_modifyitems(config, items):
    for item in items:
        folder = os.path.relpath(str(item.path), _TESTS).split(os.sep)[0]
        if folder in CORE_FOLDERS:
            item.add_marker(pytest.mark.core)
