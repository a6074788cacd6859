"""In-process replay of procedural solutions: ``-m analyst_env.benchmarks.solutions_replay N``.

Makes tasks 0..N-1 of the train split (seed 11) in a scratch cache, builds each
task's solution from its plan, runs the cells in a fresh namespace inside the
task's files and scores the printed answer with the task's own scorer (a workbook or chart
it saves is read from that copy, as the server reads it from the sandbox). It
proves the cells compute the gold from the files, quickly; the live-server replay
(the sandbox running them, the server scoring) is ``analyst-env export sft``
(``evaluation/solution_replay.py``).
"""

from __future__ import annotations

import collections
import contextlib
import io
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from analyst_env.datasets.procedural import solution_plan, solutions
from analyst_env.datasets.procedural.dataset import ProceduralDataset
from analyst_env.task_format import Task, ToolCall
from analyst_env.verifiers import judge
from analyst_env.verifiers.verdict import VerifyContext


def run_cells(steps: list, folder: Path) -> str:
    """The text the last notebook cell of ``steps`` prints, run in ``folder``."""
    namespace: dict = {}
    out, here = "", os.getcwd()
    os.chdir(folder)
    try:
        for step in steps:
            if step.tool == "add_and_execute_code_cell":
                buffer = io.StringIO()
                with contextlib.redirect_stdout(buffer):
                    exec(step.arguments["code"], namespace)  # noqa: S102 (our own cells)
                out = buffer.getvalue()
    finally:
        os.chdir(here)
    return out


def solved(task: Task, steps: list[ToolCall], scratch: Path) -> float:
    """The reward of ``steps`` run in a fresh copy of ``task``'s files in ``scratch`` (an edit
    in place must not touch the task's own files); a saved file is read from the copy."""
    shutil.rmtree(scratch, ignore_errors=True)
    for name, path in task.files.items():
        (scratch / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, scratch / name)
    answer = solutions.answer_from(run_cells(steps, scratch))

    def read_file(name: str) -> bytes:
        return (scratch / name).read_bytes()

    context = VerifyContext(task_files=dict(task.files), read_file=read_file)
    return judge(task.verifier, answer, task.answer, context).reward


def main(n: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="solutions-", dir=".") as tmp:
        ds = ProceduralDataset(11, cache_dir=tmp, keep_dirs=n + 10)
        failed: list[str] = []
        passed = 0
        uncovered: collections.Counter[str] = collections.Counter()
        turns: dict[str, list[int]] = collections.defaultdict(list)
        started = time.perf_counter()
        replay_s = 0.0
        for i in range(n):
            task = ds.task("train", i)
            folder = Path(next(iter(task.files.values()))).parent
            plan = solution_plan.read(folder)
            try:
                steps = solutions.build(plan or {}, solutions.style_for(task.id))
            except solutions.NoSolution:
                uncovered[task.metadata["category"]] += 1
                continue
            t0 = time.perf_counter()
            reward = solved(task, steps, Path(tmp) / "episode")
            replay_s += time.perf_counter() - t0
            if reward == 1.0:
                passed += 1
                turns[task.metadata["level"]].append(len(steps) + 1)  # + final_answer
            else:
                failed.append(task.id)
        covered = passed + len(failed)
        return {
            "tasks": n,
            "covered": covered,
            "passed": passed,
            "failed": failed,
            "uncovered_by_category": dict(uncovered),
            "replays_per_s": round(covered / replay_s, 1) if replay_s else 0.0,
            "turns_by_level": {k: round(sum(v) / len(v), 2) for k, v in sorted(turns.items())},
            "seconds": round(time.perf_counter() - started, 1),
        }


if __name__ == "__main__":
    print(main(int(sys.argv[1]) if len(sys.argv) > 1 else 200))
