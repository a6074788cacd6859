"""Atomic, shared on-disk cache for generated datasets.

Generated files live under ``$ANALYST_ENV_CACHE`` (default
``~/.cache/analyst_env``) in a directory named by generator version and seed.
A set is built in a private temporary directory and then renamed into place,
so concurrent processes either see a complete set or none; the loser of a
race discards its copy.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from analyst_env.paths import cache_root

__all__ = ["MANIFEST", "cache_root", "materialize"]

MANIFEST = "manifest.json"


def materialize(final: Path, build: Callable[[Path], object]) -> Path:
    """Ensure ``final`` exists, building it with ``build(tmp_dir)`` if needed.

    Args:
        final: Directory the complete set must end up in.
        build: Writes the whole set, including ``manifest.json``, into the given directory.

    Returns:
        ``final``.

    Raises:
        RuntimeError: If ``final`` exists but holds no manifest (a damaged cache).
    """
    if (final / MANIFEST).is_file():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        build(tmp)
        os.chmod(tmp, 0o755)
        try:
            os.rename(tmp, final)
        except OSError:
            if not (final / MANIFEST).is_file():
                raise RuntimeError(f"damaged dataset cache {final}: delete it and retry") from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final
