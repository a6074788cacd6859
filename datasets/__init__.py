"""Tasks and the datasets that provide them: loaders, the shipped starter set, file previews.

``describe_file`` is imported on first use: the previews need the wire types (and so
openenv), which the CLI's parser, ``datasets prepare`` and the loaders do not.
"""

from typing import Any

from analyst_env.datasets.registry import known_datasets, load_dataset
from analyst_env.task_format import Dataset, Task, VerifierSpec

__all__ = ["Dataset", "Task", "VerifierSpec", "describe_file", "known_datasets", "load_dataset"]


def __getattr__(name: str) -> Any:
    if name == "describe_file":
        from analyst_env.datasets.preview import describe_file

        return describe_file
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
