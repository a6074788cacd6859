"""The shared benchmark copies, for the scorer tests that run on real benchmark tasks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def shared():
    """``shared(name)``: the folder of benchmark ``name`` (``../shared/datasets`` next to the repo,
    or ``$ANALYST_ENV_SHARED_DATASETS``), or a skip when it is absent."""

    def folder(name: str) -> Path:
        root = (
            os.environ.get("ANALYST_ENV_SHARED_DATASETS")
            or REPO_ROOT / ".." / "shared" / "datasets"
        )
        path = Path(root).resolve() / name
        if not path.is_dir():
            pytest.skip(f"shared benchmark data {name} not found at {path}")
        return path

    return folder
