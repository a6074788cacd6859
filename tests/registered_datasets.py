"""Datasets a test registers under a format of its own (``registry.FORMATS`` names loaders
as ``"module:function"``, so the loader must live in an importable module)."""

from __future__ import annotations

from pathlib import Path

from analyst_env.datasets import Dataset

DATASETS: dict[str, Dataset] = {}


def load(path: str) -> Dataset:
    """The dataset registered as the path's last part."""
    return DATASETS[Path(path).name]
