"""The one quarantine decision: which upstream tasks have a gold no training or grading may trust.

Loaders record what their gold checks find in ``metadata["gold_status"]``
(:mod:`~analyst_env.datasets.gold_audit`); :func:`audit_initial_state` adds the
check that needs the task's files: **solved by its initial state**, the null run
(the untouched initial files, an empty answer) scored offline by the task's own
scorer, for every file kind. :func:`~analyst_env.datasets.registry.load_dataset`
runs it on every dataset it loads, so the decision is made once, at load, and
everything that reads :func:`quarantine_reason` (``Task.quarantine_reason``)
agrees: resets that draw, ``eval``, ``export harbor``, ``/web`` and ``validate``,
whose own null run over the protocol is then a cross-check (a served task its
null run finds solved is a failure of this module, reported as such).

Workbooks are scored here without recalculation (no LibreOffice start per task at
load): on cached values, where the workbook scorer never lets an uncomputed formula
match, and, for references saved without cached values, by comparing the input's
cells, formulas as written, with each reference's on the checked sheets.

Only upstream tasks (a loader recorded a ``gold_status``) are audited: a task of
our own that its initial state solves fails ``validate``'s ``null`` check instead,
since it is ours to fix.

Example:
    >>> from analyst_env.task_format import Task, VerifierSpec
    >>> task = Task(id="t", instruction="n?", answer=3, oracle_answer="3",
    ...             verifier=VerifierSpec(name="numeric"), metadata={"gold_status": "ok"})
    >>> initial_state_finding(task) is None
    True
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openpyxl

from analyst_env.task_format import GOLD_OK, Task
from analyst_env.verifiers.scorers import judge
from analyst_env.verifiers.verdict import VerifyContext
from analyst_env.verifiers.workbook_compare import compare_workbooks, enabled_value_sheets

SOLVED_BY_INITIAL_STATE = "solved by its initial state"
"""The reason (up to its colon) of a task whose null run scores above 0."""

UNCHECKED_SCORERS = frozenset({"llm_judge"})
"""Scorers not run at load: the judge needs its service (and a null answer costs a call)."""


def quarantine_reason(task: Task) -> str | None:
    """Why ``task``'s gold is not trusted, or None: the decision every user reads."""
    return task.quarantine_reason


def _cells(ws) -> dict[tuple[int, int], Any]:
    return {
        (c.row, c.column): c.value
        for row in ws.iter_rows()
        for c in row
        if c.value is not None and c.value != ""
    }


class _Books:
    """Workbooks opened once per audit (a benchmark's tasks share input workbooks)."""

    def __init__(self) -> None:
        self._open: dict[tuple[str, bool], Any] = {}

    def __call__(self, path: str, values: bool) -> Any:
        key = (str(path), values)
        if key not in self._open:
            self._open[key] = openpyxl.load_workbook(path, data_only=values)
        return self._open[key]


def _workbook_finding(task: Task, books: _Books) -> str | None:
    """The null run of a workbook task: the input workbook, untouched, against each reference.

    A reference matches it if its checked sheets hold the input's cells (formulas as
    written: a reference saved without cached values), or if the scorer's comparison
    on cached values accepts it (an uncomputed formula never matches there).
    """
    name = task.answer.get("workbook")
    if name not in task.files:
        return None  # nothing there to begin with: the scorer finds no file
    path = task.files[name]
    given, given_values = books(path, False), books(path, True)
    for number, ref in enumerate(task.answer.get("references", []), start=1):
        board = ref.get("check_board", {})
        formulas, values = books(ref["path"], False), books(ref["path"], True)
        same = len(given.worksheets) == len(formulas.worksheets) and all(
            _cells(given.worksheets[i - 1]) == _cells(formulas.worksheets[i - 1])
            for i in enabled_value_sheets(board)
            if i <= len(formulas.worksheets)
        )
        if same:
            return (
                f"{SOLVED_BY_INITIAL_STATE}: reference {number} is the input workbook "
                "unchanged, so the untouched workbook scores 1"
            )
        reason = compare_workbooks(
            given_values, values, None, board, result_formulas=given, ref_formulas=formulas
        )
        if reason is None:
            return (
                f"{SOLVED_BY_INITIAL_STATE}: the untouched workbook matches reference {number} "
                "on its cached values"
            )
    return None


def _null_reward(task: Task) -> float:
    """The null run's reward offline: the empty answer, the task's files untouched."""

    def read_file(name: str) -> bytes:
        if name not in task.files:
            raise FileNotFoundError(name)
        return Path(task.files[name]).read_bytes()

    context = VerifyContext(task_files=dict(task.files), read_file=read_file)
    return judge(task.verifier, "", task.answer, context).reward


def initial_state_checkable(task: Task) -> bool:
    """Whether the load-time check can score ``task``'s null run: not when hooks set it up or
    score it (they run in a sandbox) or its scorer needs a service. ``validate``'s own null
    run, over the protocol, is then the only check, and it says so."""
    return not task.verify and not task.setup and task.verifier.name not in UNCHECKED_SCORERS


def initial_state_finding(task: Task, books: _Books | None = None) -> str | None:
    """``"solved by its initial state: ..."`` when doing nothing scores above 0, else None."""
    if not initial_state_checkable(task):
        return None
    if task.verifier.name == "workbook_match":
        return _workbook_finding(task, books or _Books())
    reward = _null_reward(task)
    if reward > 0:
        return (
            f"{SOLVED_BY_INITIAL_STATE}: the null run (empty answer, untouched files) "
            f"scores {reward:g}"
        )
    return None


def audit_initial_state(tasks: list[Task]) -> None:
    """Record :func:`initial_state_finding` in the ``gold_status`` of each upstream task whose
    other checks passed (a task already quarantined keeps its first evidence)."""
    books = _Books()
    for task in tasks:
        if task.metadata.get("gold_status") != GOLD_OK:
            continue
        try:
            finding = initial_state_finding(task, books)
        except Exception:  # noqa: BLE001 - a scorer that cannot run here leaves it to validate
            continue
        if finding:
            task.metadata["gold_status"] = finding


__all__ = [
    "SOLVED_BY_INITIAL_STATE",
    "audit_initial_state",
    "initial_state_checkable",
    "initial_state_finding",
    "quarantine_reason",
]
