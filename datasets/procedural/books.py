"""Workbook answers of procedural tasks: the reference, the instruction and the oracle for a sheet.

A workbook template (``t_books``) asks for a sheet; its query's table is
computed by both engines like any other answer (``generator``). This module
turns the agreed table into what ``workbook_match`` scores against:

- a result workbook (``result.xlsx``, one sheet) or an in-place edit of the
  input workbook (a sheet added after its sheets, or a column added to its
  records sheet; every sheet is then checked, so the edit must keep the rest);
- the reference workbook, written under the task's own folder in
  ``references/`` on the host: the task's ``files`` never name it, so it never
  enters the sandbox; for an edit it is the input's own frames plus the edit,
  so every untouched cell is the input's cell;
- the instruction, built from the same column definitions as the reference
  (``workbook_draft``), and the oracle: one Python cell that writes
  the reference cells with openpyxl in the agent's kernel.

A table that cannot be scored fairly is dropped: a value on a rounding
boundary, more rows than the scorer checks one by one, a header equal to
another header or a sheet name the workbook already has.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from analyst_env.datasets.procedural.domain_schema import Domain
from analyst_env.datasets.procedural.files import Placement
from analyst_env.datasets.procedural.templates import Ask, SheetAsk
from analyst_env.datasets.procedural.workbook_draft import (
    RESULT,
    Column,
    Sheet,
    WorkbookDraft,
    checked_then_submit,
    finish,
    leaks,
    oracle_code,
    rules,
    sheet_sections,
    workbook_request,
)
from analyst_env.datasets.procedural.writers import write_xlsx_fast
from analyst_env.task_format import ToolCall, VerifierSpec

REFERENCE = "references/reference.xlsx"
"""The reference workbook, relative to the task's folder (host only)."""


class Unscorable(Exception):
    """The table cannot be scored fairly; ``reason`` is the counted cause."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class Book:
    """What a workbook task adds to the common parts: its instruction tail, answer and oracle."""

    instruction: str
    answer: dict[str, Any]
    oracle_steps: list[ToolCall]
    output: str  # "workbook" (result.xlsx) or "edit" (the input, in place)


def _columns(sheet: SheetAsk, header: list[str]) -> list[Column]:
    """The sheet's columns; a ``*`` entry stands for one column per label of ``header``."""
    out = [Column(sheet.label[0], sheet.label[1])]
    for name, meaning, decimals in sheet.columns:
        if name == "*":
            out += [Column(h, f"{meaning} {h} (0 where there is none)", decimals) for h in header]
            out.append(Column("Total", "the sum of the row's values before rounding", decimals))
        else:
            out.append(Column(name, meaning, decimals))
    return out


def _draft(ask: Ask, table: list[list], level: str) -> WorkbookDraft:
    sheet = ask.sheet
    assert sheet is not None
    header, body = (table[0][1:-1], table[1:]) if ask.op[0] == "pivot_table" else ([], table)
    columns = _columns(sheet, [str(h) for h in header])
    names = [c.name for c in columns]
    if len(set(names)) != len(names):
        raise Unscorable("sheet-header-clash")
    frame = pd.DataFrame(body, columns=names)
    if "records" in frame:  # a count: written as a whole number
        frame["records"] = frame["records"].astype(int)
    if ask.op[0] != "pivot_table" and list(frame[names[0]]) != sorted(
        frame[names[0]], key=str.casefold
    ):
        raise Unscorable("sheet-order-ambiguous")  # "A to Z" must not depend on letter case
    one = Sheet(sheet.name, sheet.what, frame, columns, sheet.order)
    finished = finish(WorkbookDraft(level, [one]))
    if finished is None:
        raise Unscorable("sheet-unscorable")
    return finished


def screen(ask: Ask, table: list[list] | None, level: str) -> None:
    """Raise ``Unscorable`` now if the sheet for ``table`` could not be scored fairly."""
    if table is None:
        raise Unscorable("undefined-answer")
    _draft(ask, table, level)


def _edit_code(file: str, body: list[str]) -> str:
    return "\n".join(
        ["import openpyxl", f"wb = openpyxl.load_workbook({file!r})", *body, f"wb.save({file!r})"]
        + [f"print('saved', {file!r})"]
    )


def sheet_book(
    ask: Ask,
    table: list[list],
    level: str,
    head: str,
    place: Placement,
    fact: pd.DataFrame,
    dim: pd.DataFrame | None,
    directory: Path,
) -> Book:
    """A result workbook or an added sheet, from the engines' agreed ``table``.

    ``head`` is the instruction's start (the question and the data); the rest asks
    for the sheet. Raises ``Unscorable`` when the table cannot be scored fairly or
    the instruction spells out one of its rounded numbers.
    """
    sheet = ask.sheet
    assert sheet is not None
    draft = _draft(ask, table, level)
    frame = draft.sheets[0].frame
    if not sheet.in_place:
        sheets = {sheet.name: frame}
        request = [workbook_request(draft), *sheet_sections(draft), rules()]
        code, workbook, output = oracle_code(draft), RESULT, "workbook"
    else:
        file = place.fact_file
        if sheet.name in (place.fact_table, place.dim_table) or dim is None:
            raise Unscorable("sheet-name-taken")
        sheets = {str(place.fact_table): fact, str(place.dim_table): dim, sheet.name: frame}
        request = [
            f"Add a sheet `{sheet.name}` after the existing sheets of the workbook `{file}` and "
            "save the workbook in place (the same file name).",
            *sheet_sections(draft),
            rules(file, in_place=True),
        ]
        rows = [list(frame.columns), *frame.astype(object).values.tolist()]
        code = _edit_code(
            file,
            [
                f"ws = wb.create_sheet({sheet.name!r})",
                f"for row in {rows!r}:",
                "    ws.append(row)",
            ],
        )
        workbook, output = file, "edit"
    instruction = "\n\n".join([head, *request])
    if leaks(draft, instruction):
        raise Unscorable("answer-in-question")
    return _book(instruction, workbook, sheets, code, output, directory)


def column_book(
    values: list[Any],
    head: str,
    d: Domain,
    place: Placement,
    fact: pd.DataFrame,
    dim: pd.DataFrame,
    directory: Path,
) -> Book:
    """The lookup column added in place to the records sheet, from the lookup sheet's cells."""
    attr, key, file = d.attr[0], d.key, place.fact_file
    sheet, lookup = str(place.fact_table), str(place.dim_table)
    if attr in fact.columns:
        raise Unscorable("sheet-header-clash")
    edited = fact.copy()
    edited[attr] = pd.Series(values, dtype=object, index=fact.index)
    request = (
        f"In sheet `{sheet}` of the workbook `{file}`, add a column `{attr}` after the last "
        f"column: its header `{attr}` in row 1, and in each record's row the `{attr}` of the "
        f"row's `{key}` in sheet `{lookup}` (written exactly as there), or an empty cell where "
        f"sheet `{lookup}` has no such `{key}`. Keep every other cell, row and sheet as it is: "
        "the rows stay in their order, and repeated or untidy rows stay as they are. Save the "
        "workbook in place (the same file name). " + checked_then_submit(file)
    )
    code = _edit_code(
        file,
        [
            f"ws = wb[{sheet!r}]",
            "col = ws.max_column + 1",
            f"ws.cell(row=1, column=col, value={attr!r})",
            f"for row, value in enumerate({list(values)!r}, start=2):",
            "    ws.cell(row=row, column=col, value=value)",
        ],
    )
    return _book(
        f"{head}\n\n{request}", file, {sheet: edited, lookup: dim}, code, "edit", directory
    )


def _book(
    instruction: str,
    workbook: str,
    sheets: dict[str, pd.DataFrame],
    code: str,
    output: str,
    directory: Path,
) -> Book:
    """Write the reference (``sheets``, in order) and the task's answer: every sheet checked.

    The reference is named after the workbook asked for (a name the instruction
    states), so the name tells an episode nothing the task has not already said.
    """
    ref = directory / REFERENCE
    ref.parent.mkdir(parents=True, exist_ok=True)
    write_xlsx_fast(sheets, ref)
    board = {str(i): {"cells": {"values": True}} for i in range(1, len(sheets) + 1)}
    answer = {
        "workbook": workbook,
        "references": [{"name": Path(workbook).stem, "path": str(ref), "check_board": board}],
    }
    steps = [ToolCall(tool="add_and_execute_code_cell", arguments={"code": code})]
    return Book(instruction, answer, steps, output)


VERIFIER = VerifierSpec(name="workbook_match")

__all__ = ["REFERENCE", "VERIFIER", "Book", "Unscorable", "column_book", "screen", "sheet_book"]
