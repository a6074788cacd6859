"""One template's tasks made on their own, and its oracle cell run as an agent's kernel would.

Shared by the procedural tests of answers saved as files (workbooks, charts): the tasks
of one template (``generator.attempt(..., only=name)``), a working directory holding a
task's files, the oracle cell run there by a fresh Python process, and the verdict of the
task's scorer on what that folder then holds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from analyst_env.datasets.procedural.generator import Dropped, attempt
from analyst_env.task_format import Task
from analyst_env.verifiers import VerifyContext
from analyst_env.verifiers.scorers import score


def made(seed: int, name: str, folder: Path, want: int = 2) -> list[Task]:
    """The first ``want`` tasks of template ``name`` among indices 0-39 of the train split."""
    tasks = []
    for index in range(40):
        work = folder / f"{name}-{index}"
        work.mkdir(parents=True)
        try:
            tasks.append(attempt(seed, "train", index, 0, work, only=name))
        except Dropped:
            continue
        if len(tasks) == want:
            return tasks
    raise AssertionError(f"{name}: fewer than {want} tasks in 40 indices")


def episode_folder(task: Task, folder: Path) -> Path:
    """A working directory holding the task's files, as a sandbox's would."""
    folder.mkdir()
    for name, path in task.files.items():
        shutil.copyfile(path, folder / name)
    return folder


def run_cell(code: str, cwd: Path) -> None:
    """Run ``code`` in a fresh Python process in ``cwd`` (matplotlib drawing off-screen)."""
    env = {**os.environ, "MPLBACKEND": "Agg", "MPLCONFIGDIR": str(cwd / ".mpl")}
    subprocess.run([sys.executable, "-c", code], cwd=cwd, check=True, capture_output=True, env=env)


def scored(task: Task, cwd: Path, answer: str = "done") -> float:
    """The task's scorer on ``answer``, reading the files the agent saved from ``cwd``."""

    def read(name: str) -> bytes:
        path = cwd / name
        if not path.is_file():
            raise FileNotFoundError(name)
        return path.read_bytes()

    return score(task.verifier, answer, task.answer, VerifyContext(read_file=read))
