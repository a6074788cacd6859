"""Tasks and the datasets that provide them: loaders, the shipped starter set, file previews."""

from analyst_env.datasets.preview import describe_file
from analyst_env.datasets.registry import known_datasets, load_dataset
from analyst_env.task_format import Dataset, Task, VerifierSpec

__all__ = ["Dataset", "Task", "VerifierSpec", "describe_file", "known_datasets", "load_dataset"]
