"""Procedural task supply: every task generated from a seed with files of its own, verified as made.

See ``dataset`` (the unbounded ``procedural`` set), ``generator`` (one task;
what it draws is ``attempt_draw``), ``templates`` and the ``t_*`` modules (the
questions), ``taskdir`` (the portable task directory behind ``tasks:DIR`` and
``analyst-env generate``). ``ProceduralDataset`` is imported on first use, so that
the light modules here (``splits``, the ``generate`` command's parser) do not load
every template.
"""

from typing import Any

__all__ = ["ProceduralDataset"]


def __getattr__(name: str) -> Any:
    if name == "ProceduralDataset":
        from analyst_env.datasets.procedural.dataset import ProceduralDataset

        return ProceduralDataset
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
