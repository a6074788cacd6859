"""Resolving file paths inside an episode's working directory.

``put_file``/``get_file`` and the task-file copy accept paths from outside the
sandbox; they must not reach files elsewhere on the host. Paths are resolved
with symlinks followed, so neither ``..`` nor a symlink created by model code
can escape.
"""

from __future__ import annotations

import os


def resolve_inside(workdir: str, path: str) -> str:
    """Return the absolute, symlink-free path of ``path`` inside ``workdir``.

    Args:
        workdir: The working directory (absolute).
        path: Relative to ``workdir``, or absolute and inside it.

    Raises:
        ValueError: ``path`` is empty or resolves outside ``workdir``.
    """
    if not path:
        raise ValueError("empty path")
    root = os.path.realpath(workdir)
    full = os.path.realpath(os.path.join(root, path))
    if full != root and not full.startswith(root + os.sep):
        raise ValueError(f"path {path!r} is outside the working directory {root}")
    return full
