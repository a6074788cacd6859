"""docs/task-examples.md: one generated task per category, with its worked solution.

Why: a reader deciding whether these tasks are worth training on wants to see one of
each kind as the model sees it (the question and its files) next to what a competent
analyst would do (the solution's tool calls), not a description. The page is printed
from the generator, so it cannot drift from it: ``tests/datasets/test_tasks_doc.py``
compares it with this module's output.

The tasks come from :data:`DOCS_SEED`, a seed no example command serves, and the page shows
no gold answer (the solution computes it; the answer it submits is the last line it prints).
Styles rotate over the categories (pandas, DuckDB SQL, mixed) so each one shows.

    python -m analyst_env.datasets.procedural.examples > docs/task-examples.md
"""

from __future__ import annotations

from analyst_env.datasets.procedural import solutions
from analyst_env.datasets.procedural.dataset import ProceduralDataset
from analyst_env.datasets.procedural.solution_files import solution_for
from analyst_env.datasets.procedural.templates import CATEGORIES
from analyst_env.task_format import Task, ToolCall

DOCS_SEED = 1000
STYLES = ("pandas", "sql", "mixed")
MAX_SCAN = 400
"""Tasks of ``train`` read at most while looking for one of each category."""

_FENCE = {"add_and_execute_code_cell": "python", "run_sql": "sql", "execute_shell_command": "sh"}
_CODE_ARGUMENT = {
    "add_and_execute_code_cell": "code",
    "run_sql": "query",
    "execute_shell_command": "command",
}


def first_of_each_category(dataset: ProceduralDataset) -> dict[str, Task]:
    """The first ``train`` task of each category, in index order."""
    found: dict[str, Task] = {}
    for index in range(MAX_SCAN):
        task = dataset.task("train", index)
        found.setdefault(task.metadata["category"], task)
        if len(found) == len(CATEGORIES):
            break
    return found


def _call_markdown(call: ToolCall) -> str:
    key = _CODE_ARGUMENT.get(call.tool)
    if key is None or set(call.arguments) != {key}:
        return f"`{call.tool}({', '.join(f'{k}={v!r}' for k, v in call.arguments.items())})`"
    return f"`{call.tool}`:\n\n```{_FENCE[call.tool]}\n{call.arguments[key].rstrip()}\n```"


def example_markdown(task: Task, style: str) -> str:
    """One category's section: the question, its files, and the solution's calls."""
    meta = task.metadata
    lines = [
        f"## {meta['category']}",
        "",
        f"`{task.id}` (seed {DOCS_SEED}): template `{meta['template']}`, {meta['level']}, "
        f"depth {meta['depth']}, files {', '.join(f'`{name}`' for name in task.files)}.",
        "",
        *(f"> {line}" if line else ">" for line in task.instruction.splitlines()),
        "",
    ]
    try:
        style, steps = solution_for(task, style)
    except solutions.NoSolution:
        lines.append("No worked solution yet for this template (docs/tasks.md, Worked solutions).")
        return "\n".join(lines) + "\n"
    lines.append(f"Worked solution, {style} style ({len(steps)} calls, then `final_answer`):")
    lines.append("")
    for number, call in enumerate(steps, 1):
        lines.append(f"{number}. {_call_markdown(call)}")
        lines.append("")
    return "\n".join(lines)


def render() -> str:
    """The whole page (the tasks are made in, or read from, the usual task cache)."""
    dataset = ProceduralDataset(DOCS_SEED)
    found = first_of_each_category(dataset)
    parts = [
        "# One generated task per category, with its worked solution",
        "",
        "Printed by `python -m analyst_env.datasets.procedural.examples` from",
        f"`procedural:{DOCS_SEED}` (a seed no example serves): the first `train` task of each",
        "category, as the model reads it, then the tool calls of its worked solution, which",
        "submits the last line it prints. How tasks and solutions are made: [tasks.md](tasks.md).",
        "",
    ]
    for number, category in enumerate(CATEGORIES):
        if category in found:
            parts.append(example_markdown(found[category], STYLES[number % len(STYLES)]))
        else:
            parts.append(f"## {category}\n\nNone in the first {MAX_SCAN} tasks.\n")
    return "\n".join(parts)


def main() -> None:
    print(render(), end="")


if __name__ == "__main__":
    main()
