"""The rule for task file names, checked where files enter a working directory.

Dependency-free, so the slot runner (which runs inside a container) applies the
same rule as the backends that send it files.
"""

from __future__ import annotations


def check_task_file_name(name: str) -> None:
    """Refuse a name that could land outside the episode's working directory.

    Raises:
        ValueError: ``name`` is empty, absolute, or has a ``..`` component.
    """
    if not name or name.startswith("/") or ".." in name.split("/"):
        raise ValueError(
            f"task file name {name!r} must be a relative path inside the working directory"
        )
