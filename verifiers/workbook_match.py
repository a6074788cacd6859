"""The ``workbook_match`` scorer: does the agent's saved workbook match a reference workbook?

SheetCopilot's ``cells.values`` check (the rule itself is
:mod:`~analyst_env.verifiers.workbook_compare`); any matching reference solves
the task. Here Excel is replaced by openpyxl plus a real formula engine: the
result and every reference are recalculated with LibreOffice
(:mod:`~analyst_env.verifiers.recalc`) in one call, and a reference cell accepts
either its cached value (what Excel computed when the reference was made) or
LibreOffice's value for the same formula. So a correct formula is not failed for
an engine difference (the last digit of a float turned into text,
locale-dependent ``DATEVALUE``), and a reference saved without cached values is
still usable.

Without a recalculation (LibreOffice absent or failed, or ``recalc=False``) no cell
is skipped: a formula cell saved without its value, in a reference or in the
agent's workbook, holds :data:`~analyst_env.verifiers.workbook_compare.UNCOMPUTED`,
which equals nothing, so the check fails there with the reason. Before anything
is opened, the file must be a zip that unpacks to at most
:data:`MAX_UNPACKED_BYTES`.
"""

from __future__ import annotations

import io
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import openpyxl

from analyst_env.verifiers.recalc import RecalcError, has_formulas, recalculate_files
from analyst_env.verifiers.verdict import Verdict, VerifyContext
from analyst_env.verifiers.workbook_compare import (
    UNCOMPUTED,
    cell_equal,
    compare_sheet,
    compare_workbooks,
    enabled_value_sheets,
    table_extent,
    uncomputed_cells,
    unsupported_checks,
)

MAX_UNPACKED_BYTES = 25_000_000
"""A workbook whose parts unpack to more than this is not opened (openpyxl would spend
tens of seconds and most of a gigabyte on a 200,000-row sheet; a zip bomb much more)."""


def _load_values(data: bytes):
    return openpyxl.load_workbook(io.BytesIO(data), data_only=True)


def workbook_match(
    submitted: str,
    gold: Any,
    *,
    context: VerifyContext,
    recalc: bool = True,
    timeout_s: float = 90.0,
    max_unpacked_bytes: int = MAX_UNPACKED_BYTES,
) -> Verdict:
    """1.0 iff the saved workbook matches any reference on every ``cells.values`` sheet.

    The answer text is ignored; the workbook is read from the episode. The
    verdict's detail reaches the final observation, so it locates the first
    mismatch in the agent's own workbook without quoting any reference value.

    Args:
        submitted: The final answer (ignored).
        gold: ``{"workbook": name in the working directory, "references":
            [{"name", "path" (host xlsx), "check_board"}]}``.
        context: Gives ``read_file`` for the episode's files.
        recalc: Recalculate result and references with LibreOffice first (skipped when none
            of them holds a formula: the saved values are then all there is).
        timeout_s: LibreOffice time limit.
        max_unpacked_bytes: A workbook unpacking to more than this scores 0 unopened.

    Returns:
        The verdict, with one component per reference.
    """
    name = gold["workbook"]
    refs = gold["references"]
    if context.read_file is None:
        return Verdict(0.0, detail="no episode files to read")
    try:
        data = context.read_file(name)
    except FileNotFoundError:
        return Verdict(0.0, detail=f"{name} not found in the working directory")
    except OSError as exc:  # refused by the reader: a symbolic link, a directory, too large
        return Verdict(0.0, detail=f"{name} not read: {exc}")
    if not zipfile.is_zipfile(io.BytesIO(data)):
        return Verdict(0.0, detail=f"{name} is not an xlsx workbook")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as package:
            unpacked = sum(info.file_size for info in package.infolist())
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        return Verdict(0.0, detail=f"{name} is not an xlsx workbook: {exc}")
    if unpacked > max_unpacked_bytes:
        return Verdict(
            0.0,
            detail=f"{name} unpacks to {unpacked} bytes, over the limit of {max_unpacked_bytes}; "
            "not opened",
        )
    try:
        saved = _load_values(data)  # kept: a large workbook costs seconds to open again
    except Exception as exc:  # openpyxl raises many types on a corrupt package
        return Verdict(0.0, detail=f"{name} cannot be opened: {type(exc).__name__}: {exc}")
    detail_prefix = ""
    recalculated: Sequence[bytes | None] = [None] * (len(refs) + 1)
    blobs = [data, *(Path(r["path"]).read_bytes() for r in refs)] if recalc else []
    if any(has_formulas(blob) for blob in blobs):  # values only: nothing to recalculate
        try:
            recalculated = _recalculate(blobs, timeout_s)
        except RecalcError as exc:
            detail_prefix = f"not recalculated ({exc}); "
    result = _load_values(recalculated[0]) if recalculated[0] else saved
    result_formulas = None
    if recalculated[0] is None and has_formulas(data):  # its formulas may lack values
        result_formulas = openpyxl.load_workbook(io.BytesIO(data))
    components, reasons = {}, []
    for number, (ref, ref_recalc) in enumerate(zip(refs, recalculated[1:]), start=1):
        ref_data = Path(ref["path"]).read_bytes()
        cached = _load_values(ref_data)
        again = _load_values(ref_recalc) if ref_recalc else None
        formulas = None
        if again is None and has_formulas(ref_data):  # its formulas may lack cached values
            formulas = openpyxl.load_workbook(io.BytesIO(ref_data))
        reason = compare_workbooks(
            result,
            cached,
            again,
            ref.get("check_board", {}),
            result_formulas=result_formulas,
            ref_formulas=formulas,
        )
        components[f"reference {number}"] = float(reason is None)  # numbered: file names are gold
        reasons.append(f"reference {number}: {reason or 'match'}")
    reward = max(components.values(), default=0.0)
    return Verdict(reward, components, detail_prefix + "; ".join(reasons))


def _recalculate(blobs: list[bytes], timeout_s: float) -> list[bytes]:
    with tempfile.TemporaryDirectory(prefix="analyst-wbmatch-") as tmp:
        paths = []
        for i, blob in enumerate(blobs):
            path = Path(tmp) / f"book{i}.xlsx"
            path.write_bytes(blob)
            paths.append(path)
        outs = recalculate_files(paths, Path(tmp) / "out", timeout_s=timeout_s)
        return [p.read_bytes() for p in outs]


__all__ = [
    "UNCOMPUTED",
    "cell_equal",
    "compare_sheet",
    "compare_workbooks",
    "enabled_value_sheets",
    "table_extent",
    "uncomputed_cells",
    "unsupported_checks",
    "workbook_match",
]
