"""Fixtures for the sandbox-environment tests: a loopback package index and a state directory.

The state directory is under the user's cache, not /tmp: the local sandbox's private
root has its own /tmp, so baked packages kept under /tmp would be invisible to kernels.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest
from recipes.pkgindex import TINY, TINY_VALUE, PackageIndex


@pytest.fixture(scope="session")
def package_index(tmp_path_factory):
    """A PEP 503 index serving ``tinypkg-recipes`` 1.0.0 (and 2.0.0) and nothing else."""
    with PackageIndex(tmp_path_factory.mktemp("index")) as index:
        index.add("tinypkg-recipes", "1.0.0", {f"{TINY}/__init__.py": f"VALUE = {TINY_VALUE}\n"})
        index.add(
            "tinypkg-recipes",
            "2.0.0",
            {
                f"{TINY}/__init__.py": "VALUE = 2\n",
                f"{TINY}/extra.py": "LAZY = 'loaded on demand'\n",
            },
        )
        yield index


@pytest.fixture
def state_dir():
    path = Path.home() / ".cache" / "analyst_env-tests" / uuid.uuid4().hex
    path.mkdir(parents=True)
    yield path
    shutil.rmtree(path, ignore_errors=True)
