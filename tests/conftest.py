"""Shared fixtures: the tiny dataset, and the real runtime and app serving it.

Every fixture here starts real parts: the local fork-server backend, the real
FastAPI app. Nothing is faked.
"""

from __future__ import annotations

import pytest
from support import make_tiny_dataset

from analyst_env.server.app import build_app
from analyst_env.server.runtime import Runtime
from analyst_env.server.settings import Settings


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory) -> Dataset:
    return make_tiny_dataset(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="session")
def settings() -> Settings:
    return Settings(cell_timeout_s=5.0, shell_timeout_s=5.0, output_limit_chars=2_000, max_sessions=40)


@pytest.fixture(scope="session")
def runtime(settings, tiny_dataset):
    rt = Runtime(settings, datasets=[tiny_dataset])
    yield rt
    rt.close()


@pytest.fixture(scope="session")
def app(settings, runtime):
    return build_app(settings, runtime=runtime)
