"""Fixtures: the shared benchmark folder (optional) and the starter set."""

import os
from pathlib import Path

import pytest

from analyst_env.datasets.starter_set import load_starter

REPO_ROOT = Path(__file__).resolve().parents[2]


def shared_datasets() -> Path:
    """``$ANALYST_ENV_SHARED_DATASETS`` or ``../shared/datasets`` next to the repo root."""
    env = os.environ.get("ANALYST_ENV_SHARED_DATASETS")
    return Path(env) if env else (REPO_ROOT / ".." / "shared" / "datasets").resolve()


@pytest.fixture(scope="session")
def dabench_dir() -> Path:
    path = shared_datasets() / "dabench"
    if not (path / "da-dev-questions.jsonl").is_file():
        pytest.skip(f"DABench data not found at {path} (set ANALYST_ENV_SHARED_DATASETS)")
    return path


@pytest.fixture(scope="session")
def starter():
    return load_starter()
