"""Fixtures for the local sandbox tests: one real backend (zygote) per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from analyst_env.envs.local import LocalSandbox, LocalSandboxBackend


@pytest.fixture(scope="module")
def backend() -> Iterator[LocalSandboxBackend]:
    backend = LocalSandboxBackend()
    backend.warm_up()
    yield backend
    backend.close()


@pytest.fixture
def sandbox(backend: LocalSandboxBackend) -> Iterator[LocalSandbox]:
    sandbox = backend.start("default", files={}, seed=0)
    yield sandbox
    sandbox.close()
