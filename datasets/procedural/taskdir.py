"""The portable task directory: ``tasks.jsonl`` plus the files it names. ``tasks:DIR`` serves one.

Layout::

    DIR/
      dataset.json      optional: {"format": "analyst_env-tasks/1", "name": ..., ...}
      tasks.jsonl       one task per line, the fields of ``datasets.task.Task``
      files/...         the tasks' input files (any layout: tasks.jsonl paths are relative to DIR)
      references/...    reference workbooks of workbook-scored tasks (never copied into a sandbox)
      solutions.jsonl   optional: worked solutions (``generate --with-solutions``), never served

Each line is a ``Task`` record: ``id``, ``instruction``, ``files`` (``{name in
the working directory: path relative to DIR}``), ``answer``,
``oracle_answer``, ``verifier`` (``{"name": "numeric", "params": {...}}``),
and optionally ``split``, ``metadata``, ``oracle_steps``, ``max_steps``,
``setup``, ``verify``. Workbook answers (``workbook_match``) name their
reference files relative to DIR too. This is the format ``analyst-env
generate`` writes, and how users bring their own tasks: any generator (an
AWM- or DataMind-style pipeline) that can write these lines can be served.

Loading checks every line and refuses the directory with the line number of
the first bad one: invalid JSON, a missing field, an unknown scorer, a
duplicate id, a file outside DIR or missing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from analyst_env.task_format import Dataset, Task, answer_references

TASKS_FILE = "tasks.jsonl"
META_FILE = "dataset.json"
FORMAT = "analyst_env-tasks/1"


class TaskDirError(ValueError):
    """A task directory that cannot be served, with where and why."""


def _inside(root: Path, rel: str, where: str) -> str:
    path = (root / rel).resolve()
    if root not in path.parents:
        raise TaskDirError(f"{where}: path {rel!r} leaves the task directory")
    if not path.is_file():
        raise TaskDirError(f"{where}: file {rel!r} not found")
    return str(path)


def _resolve(record: dict[str, Any], root: Path, where: str) -> dict[str, Any]:
    files = record.get("files") or {}
    if not isinstance(files, dict):
        raise TaskDirError(f"{where}: 'files' must map names to paths")
    record["files"] = {str(n): _inside(root, str(p), where) for n, p in files.items()}
    verifier = record.get("verifier") or {}
    if isinstance(verifier, dict) and verifier.get("name") == "workbook_match":
        for ref in (record.get("answer") or {}).get("references", []):
            ref["path"] = _inside(root, str(ref["path"]), where)
    return record


def load_task_dir(path: str) -> Dataset:
    """Load a portable task directory (see the module docstring).

    Raises:
        TaskDirError: The directory, a line or a file is not usable (the message says which).
    """
    from analyst_env.verifiers.scorers import SCORERS

    root = Path(path).resolve()
    lines_file = root / TASKS_FILE
    if not lines_file.is_file():
        raise TaskDirError(f"{root} holds no {TASKS_FILE}")
    name = root.name
    if (root / META_FILE).is_file():
        try:
            name = str(
                json.loads((root / META_FILE).read_text(encoding="utf-8")).get("name") or name
            )
        except (json.JSONDecodeError, AttributeError) as exc:
            raise TaskDirError(f"{root / META_FILE}: not a JSON object ({exc})") from None
    tasks, seen = [], set()
    with open(lines_file, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{lines_file}:{number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TaskDirError(f"{where}: invalid JSON ({exc.msg})") from None
            if not isinstance(record, dict):
                raise TaskDirError(f"{where}: a task must be a JSON object")
            try:
                task = Task.model_validate(_resolve(record, root, where))
            except ValidationError as exc:
                raise TaskDirError(
                    f"{where}: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}"
                ) from None
            if task.verifier.name not in SCORERS:
                raise TaskDirError(f"{where}: unknown verifier {task.verifier.name!r}")
            if task.id in seen:
                raise TaskDirError(f"{where}: duplicate task id {task.id!r}")
            seen.add(task.id)
            tasks.append(task)
    if not tasks:
        raise TaskDirError(f"{lines_file} holds no tasks")
    return Dataset(name=name, tasks=tasks)


def write_task_dir(
    tasks: list[Task], out: Path, meta: dict[str, Any], oracle_steps: bool = True
) -> Path:
    """Copy ``tasks`` and their files into a new task directory ``out``; return the tasks.jsonl
    path."""
    import shutil

    out.mkdir(parents=True, exist_ok=True)
    if (out / TASKS_FILE).exists():
        raise TaskDirError(f"{out} already holds a {TASKS_FILE}; choose an empty directory")
    lines = []
    for task in tasks:
        folder = out / "files" / task.id
        folder.mkdir(parents=True, exist_ok=True)
        record = task.model_dump(mode="json")
        record["files"] = {}
        for name, src in task.files.items():
            dest = folder / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
            record["files"][name] = str(dest.relative_to(out))
        for number, ref in enumerate(answer_references(record["answer"]), start=1):
            dest = out / "references" / task.id / f"reference-{number}.xlsx"
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ref["path"], dest)
            ref["path"] = str(dest.relative_to(out))
        if not oracle_steps:
            record.pop("oracle_steps", None)
        lines.append(json.dumps(record, sort_keys=True))
    (out / META_FILE).write_text(
        json.dumps({"format": FORMAT, **meta}, indent=1, sort_keys=True) + "\n", encoding="utf-8"
    )
    (out / TASKS_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out / TASKS_FILE
