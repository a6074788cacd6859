"""Loader for SheetCopilot workbook-editing tasks scored on cell values (``workbook_match``).

The data is GPL-3.0 and never ships with this project: the loader reads a folder
laid out like the shared subset (``tasks.jsonl`` with upstream ``dataset.xlsx``
rows, ``task_sheets/<Workbook>.xlsx``, and
``task_sheet_answers_v2/<Workbook>/<No>_<Workbook>/<No>_<Workbook>_gtK.xlsx``
with ``*_gtK_check.yaml``). The agent edits the input workbook in place, under
its original name, and then calls ``final_answer``; the scorer reads the saved
file from the episode. The oracle writes the first reference's cells into the
workbook with the agent's own Python tool.

Gold problems are recorded, never hidden: ``metadata["gold_status"]`` is
``"ok"``, or ``"partially scored"`` when a check list enables checks other than
``cells.values`` (charts, pivots...), which are not scored, or ``"reference
formulas wrong: ..."`` when every reference fails a check of
:mod:`~analyst_env.datasets.gold_audit` (the task is quarantined); ``gold_notes`` lists
details such as reference formula cells saved without cached values (the scorer
takes those from the recalculation, as Excel would on open).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import openpyxl
import yaml

from analyst_env.datasets.gold_audit import workbook_reference_problems
from analyst_env.task_format import Dataset, Task, ToolCall, VerifierSpec
from analyst_env.verifiers.workbook_compare import unsupported_checks

TASKS = "tasks.jsonl"
SHEETS = "task_sheets"
ANSWERS = "task_sheet_answers_v2"
_GT = re.compile(r"_gt(\d+)\.xlsx$")


def build_instruction(row: dict[str, Any], workbook: str) -> str:
    """The agent-facing instruction for one task row.

    Example:
        >>> text = build_instruction(
        ...     {"Context": "Sales by week.", "Instructions": "Add a Total row."}, "W.xlsx"
        ... )
        >>> "save it in place as `W.xlsx`" in text
        True
    """
    return "\n\n".join(
        [
            f"The Excel workbook `{workbook}` is in your working directory. "
            f"{str(row.get('Context') or '').strip()}",
            "Task: " + str(row["Instructions"]).strip(),
            (
                "Edit the workbook with Python (openpyxl or pandas) and save it in place "
                f"as `{workbook}` "
                "(same name; keep the other sheets). Formulas are fine: the workbook is "
                "recalculated "
                "before it is checked. Only cell values are checked, column by column under their "
                "headers. When the file is saved, call final_answer (the text is not scored)."
            ),
        ]
    )


def _reference_number(path: Path) -> int:
    """The ``N`` of a reference workbook named ``*_gt<N>.xlsx``."""
    match = _GT.search(path.name)
    if match is None:
        raise ValueError(f"{path}: reference workbook names end in _gt<N>.xlsx")
    return int(match.group(1))


def _references(folder: Path) -> list[dict[str, Any]]:
    refs = []
    for path in sorted(folder.glob("*_gt*.xlsx"), key=_reference_number):
        check = path.with_name(path.stem + "_check.yaml")
        if not check.is_file():
            raise FileNotFoundError(f"reference {path} has no check list {check.name}")
        with open(check, encoding="utf-8") as fh:
            board = (yaml.safe_load(fh) or {}).get("check_board")
        if not isinstance(board, dict):
            raise ValueError(f"{check} has no check_board mapping")
        refs.append({"name": path.stem, "path": str(path), "check_board": board})
    return refs


def _raw_cells(ws) -> dict[str, Any]:
    return {
        c.coordinate: c.value for row in ws.iter_rows() for c in row if c.value not in (None, "")
    }


def _reference_edits(
    input_path: Path, ref_path: Path
) -> tuple[list[str], dict[str, dict[str, Any]], int]:
    """Sheets of the reference, and per sheet the cells to write into the input to reproduce it.

    A formula cell is written as its cached value; where the reference has no
    cached value the formula itself is written (the scorer recalculates).

    Returns:
        (sheet titles in order, {sheet: {coordinate: value}}, formula cells without cached values).
    """
    src = openpyxl.load_workbook(input_path)
    ref = openpyxl.load_workbook(ref_path)
    ref_values = openpyxl.load_workbook(ref_path, data_only=True)
    edits: dict[str, dict[str, Any]] = {}
    uncached = 0
    for ws in ref.worksheets:
        want = _raw_cells(ws)
        cached = {k: v for k, v in _raw_cells(ref_values[ws.title]).items()}
        have = _raw_cells(src[ws.title]) if ws.title in src.sheetnames else {}
        cells: dict[str, Any] = {}
        for coord, raw in want.items():
            is_formula = isinstance(raw, str) and raw.startswith("=")
            if is_formula and cached.get(coord) is None:
                uncached += 1
                value = raw
            else:
                value = cached.get(coord, raw)
            if have.get(coord) != value:
                cells[coord] = value
        for coord in have.keys() - want.keys():
            cells[coord] = None
        if cells:
            edits[ws.title] = cells
    return [ws.title for ws in ref.worksheets], edits, uncached


def oracle_code(workbook: str, sheets: list[str], edits: dict[str, dict[str, Any]]) -> str:
    """Python for the agent's kernel that turns the input workbook into the reference.

    Example:
        >>> code = oracle_code("T.xlsx", ["Sheet1"], {"Sheet1": {"C1": "Total"}})
        >>> "wb.save('T.xlsx')" in code
        True
    """
    lines = [
        "import datetime",
        "import openpyxl",
        f"wb = openpyxl.load_workbook({workbook!r})",
        f"SHEETS = {sheets!r}",
        "for name in SHEETS:",
        "    if name not in wb.sheetnames:",
        "        wb.create_sheet(name)",
        "for name in list(wb.sheetnames):",
        "    if name not in SHEETS:",
        "        del wb[name]",
        "wb._sheets.sort(key=lambda ws: SHEETS.index(ws.title))",
        f"CELLS = {edits!r}",
        "for name, cells in CELLS.items():",
        "    for coord, value in cells.items():",
        "        wb[name][coord] = value",
        f"wb.save({workbook!r})",
        "print('saved', sum(len(c) for c in CELLS.values()), 'cells')",
    ]
    return "\n".join(lines)


def _shorten(problems: list[str], keep: int = 2) -> str:
    more = f" and {len(problems) - keep} more" if len(problems) > keep else ""
    return "; ".join(problems[:keep]) + more


def load_sheetcopilot(root: str | os.PathLike[str], split: str = "test") -> Dataset:
    """Load SheetCopilot tasks with their reference workbooks.

    Args:
        root: Folder with ``tasks.jsonl``, ``task_sheets/`` and ``task_sheet_answers_v2/``.
        split: Split name given to every task.

    Returns:
        A dataset named ``sheetcopilot``, one task per row that has references.

    Raises:
        FileNotFoundError: If ``tasks.jsonl``, an input workbook, or a task's
            references are missing.
        ValueError: If a row or check list is malformed.
    """
    root = Path(root).resolve()
    if not (root / TASKS).is_file():
        raise FileNotFoundError(f"{root / TASKS} not found: not a SheetCopilot folder")
    tasks = []
    with open(root / TASKS, encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    for row in rows:
        try:
            sheet, no = str(row["Sheet Name"]), int(row["No."])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(
                f"{root / TASKS}: row without a valid 'Sheet Name'/'No.': {row!r:.200}"
            ) from exc
        workbook = f"{sheet}.xlsx"
        input_path = root / SHEETS / workbook
        if not input_path.is_file():
            raise FileNotFoundError(f"input workbook {input_path} not found")
        folder = root / ANSWERS / sheet / f"{no}_{sheet}"
        refs = _references(folder)
        if not refs:
            raise FileNotFoundError(f"no reference workbooks (*_gtK.xlsx) in {folder}")
        sheets, edits, uncached = _reference_edits(input_path, Path(refs[0]["path"]))
        notes = []
        if uncached:
            notes.append(
                f"first reference has {uncached} formula cells without cached values "
                "(scored on recalculation)"
            )
        skipped = sorted({c for r in refs for c in unsupported_checks(r["check_board"])})
        if skipped:
            notes.append("checks not scored: " + ", ".join(skipped))
        problems = {r["name"]: workbook_reference_problems(r["path"]) for r in refs}
        notes += [f"reference {n}: {_shorten(p)}" for n, p in enumerate(problems.values(), 1) if p]
        status = "partially scored" if skipped else "ok"
        if all(problems.values()):  # no sound reference: a correct workbook cannot score 1
            status = "reference formulas wrong: " + _shorten(next(iter(problems.values())))
        tasks.append(
            Task(
                id=f"sheetcopilot-{sheet}-{no}",
                instruction=build_instruction(row, workbook),
                files={workbook: str(input_path)},
                answer={"workbook": workbook, "references": refs},
                oracle_answer="done",
                oracle_steps=[
                    ToolCall(
                        tool="add_and_execute_code_cell",
                        arguments={"code": oracle_code(workbook, sheets, edits)},
                    )
                ],
                verifier=VerifierSpec(name="workbook_match"),
                split=split,
                metadata={
                    "source": "sheetcopilot",
                    "kind": "excel",
                    "workbook": sheet,
                    "categories": row.get("Categories"),
                    "n_references": len(refs),
                    "gold_status": status,
                    "gold_notes": notes,
                },
            )
        )
    return Dataset(name="sheetcopilot", tasks=tasks)


__all__ = ["build_instruction", "load_sheetcopilot", "oracle_code"]
