"""The ``starter`` set: 376 tasks over CSV, SQLite and Excel files, kept as a task directory.

The set is data, not code: ``datasets/starter/`` is a portable task directory
(:mod:`~analyst_env.datasets.procedural.taskdir`: ``tasks.jsonl``, the 13 input
files under ``files/``, the reference workbooks of its 35 result-workbook tasks
under ``references/``). It was written once by the project's first task generator
(version 4, seed 0) and frozen there, so every id, question and answer stays what
runs, papers and trained policies have used since; new tasks come from the
procedural generator (``procedural``, ``analyst-env generate``), which is the one
task engine. The directory is part of the package, which no sandbox can read
(``tests/leak_probes.py``): its answers stay on the host.

Example:
    >>> ds = load_starter()
    >>> ds.name, len(ds.tasks)
    ('starter', 376)
"""

from __future__ import annotations

from pathlib import Path

from analyst_env.datasets.procedural.taskdir import load_task_dir
from analyst_env.task_format import Dataset

STARTER_DIR = Path(__file__).resolve().with_name("starter")


def load_starter() -> Dataset:
    """The starter set, its task files read in place from the package (nothing is generated)."""
    return load_task_dir(str(STARTER_DIR))
