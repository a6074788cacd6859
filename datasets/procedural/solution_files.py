"""``solutions.jsonl``: the worked solutions ``generate --with-solutions`` writes beside a frozen
set's ``tasks.jsonl``.

One line per task that has a solution: ``task_id``, ``style``, ``level``,
``category``, ``template`` and ``steps`` (``[{"tool", "arguments"}]``: the tool
calls; the answer is the last line the last one prints). The file sits at the
directory's root, outside every task's ``files``, so the ``tasks:DIR`` loader
never serves it and no sandbox sees it; it is training data, not part of a
task. Tasks without a solution yet are counted by category, not written.
:class:`FrozenSolutions` reads it back (``export sft --dataset tasks:DIR``): a
frozen set has no plans, so its solutions are the ones written, in their style.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from analyst_env.datasets.procedural import solution_plan, solutions
from analyst_env.task_format import Task, ToolCall

SOLUTIONS_FILE = "solutions.jsonl"


def solution_for(task: Task, style: str | None = None) -> tuple[str, list[ToolCall]]:
    """(style, tool calls) of ``task``'s worked solution, from the plan in its cache folder
    (the task's own style, drawn from its id, unless ``style`` is given).

    Raises:
        solutions.NoSolution: no plan (not a procedural task, or its folder is gone), or no
            solution yet for its template.
    """
    folder = Path(next(iter(task.files.values()))).parent if task.files else None
    plan = solution_plan.read(folder) if folder is not None else None
    if plan is None:
        raise solutions.NoSolution(f"task {task.id} has no plan (not a procedural task?)")
    style = style or solutions.style_for(task.id)
    return style, solutions.build(plan, style)


def solution_line(task: Task, style: str | None = None) -> dict[str, Any]:
    """The ``solutions.jsonl`` line of ``task``.

    Raises:
        solutions.NoSolution: as :func:`solution_for`.
    """
    style, steps = solution_for(task, style)
    return {
        "task_id": task.id,
        "style": style,
        "level": task.metadata.get("level"),
        "category": task.metadata.get("category"),
        "template": task.metadata.get("template"),
        "steps": [{"tool": s.tool, "arguments": s.arguments} for s in steps],
    }


def write_solutions(tasks: list[Task], out: Path) -> dict[str, Any]:
    """Write ``out/solutions.jsonl`` for ``tasks`` (still in their cache folders); return
    ``{"solutions": n, "without_solution": {category: n}}``."""
    lines: list[str] = []
    missing: Counter[str] = Counter()
    for task in tasks:
        try:
            lines.append(json.dumps(solution_line(task), sort_keys=True))
        except solutions.NoSolution:
            missing[str(task.metadata.get("category", "?"))] += 1
    (out / SOLUTIONS_FILE).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return {"solutions": len(lines), "without_solution": dict(sorted(missing.items()))}


class FrozenSolutions:
    """The solutions of a frozen task directory (its ``solutions.jsonl``), by task id.

    Raises:
        ValueError: the file is missing, or a line is not a solution (the line is named).
    """

    def __init__(self, folder: Path) -> None:
        path = folder / SOLUTIONS_FILE
        if not path.is_file():
            raise ValueError(f"{path} does not exist (generate --with-solutions writes it)")
        self._by_id: dict[str, tuple[str, list[ToolCall]]] = {}
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                steps = [
                    ToolCall(tool=s["tool"], arguments=s["arguments"]) for s in record["steps"]
                ]
                self._by_id[str(record["task_id"])] = (str(record["style"]), steps)
            except (ValueError, TypeError, KeyError) as exc:
                raise ValueError(f"{path}, line {number}: not a solution ({exc!r})") from None

    def __len__(self) -> int:
        return len(self._by_id)

    def solution_for(self, task: Task, style: str | None = None) -> tuple[str, list[ToolCall]]:
        """(style, tool calls) of ``task``'s written solution, as :func:`solution_for`.

        Raises:
            solutions.NoSolution: none was written for it, or it is in another style than
                ``style`` (a frozen set keeps one solution a task).
        """
        found = self._by_id.get(task.id)
        if found is None:
            raise solutions.NoSolution(f"task {task.id} has no line in {SOLUTIONS_FILE}")
        if style is not None and found[0] != style:
            raise solutions.NoSolution(
                f"task {task.id}'s written solution is in the {found[0]} style, not {style}"
            )
        return found


__all__ = [
    "SOLUTIONS_FILE",
    "FrozenSolutions",
    "solution_for",
    "solution_line",
    "write_solutions",
]
