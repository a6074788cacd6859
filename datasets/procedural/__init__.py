"""Procedural task supply: every task generated from a seed with files of its own, verified as made.

See ``dataset`` (the unbounded ``procedural`` set), ``generator`` (one task;
what it draws is ``attempt_draw``), ``templates`` and the ``t_*`` modules (the
questions), ``taskdir`` (the portable task directory behind ``tasks:DIR`` and
``analyst-env generate``).
"""

from analyst_env.datasets.procedural.dataset import ProceduralDataset

__all__ = ["ProceduralDataset"]
