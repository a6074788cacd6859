"""Formula recalculation with LibreOffice headless, so a scorer can read computed values.

A workbook saved by openpyxl keeps its formulas but no cached values: read
with ``data_only=True`` every formula cell is ``None``. Excel (and SheetCopilot's
upstream checker, which drives Excel) recalculates on open; we do the same with
a real spreadsheet engine, LibreOffice Calc, converting xlsx -> xlsx. Why
LibreOffice and not a Python formula engine is measured in README.md,
"Formula recalculation".

Each call gets its own throw-away LibreOffice profile (``-env:UserInstallation``)
so parallel calls never share a lock, and the profile forces "always recalculate
on load" for Excel files (LibreOffice's default is to trust cached values). The
workbook being recalculated may be the agent's, so the profile also sets, rather
than leaves to the defaults: links to other files and sources are never
updated on load (Calc and Writer), macros never run, and untrusted referer
links are blocked. It runs on the host, outside any sandbox, so it gets an
environment of its own (``soffice_env``), none of the server's secrets. A
call that runs longer than its timeout is killed with its whole process group.

Example:
    >>> path = soffice_path()  # None when LibreOffice is not installed
    >>> path is None or path.endswith("soffice")
    True
"""

from __future__ import annotations

import io
import os
import re
import shutil
import signal
import subprocess
import tempfile
import zipfile
from pathlib import Path

DEFAULT_TIMEOUT_S = 60.0

# OOXMLRecalcMode / ODFRecalcMode: 0 = always recalculate on load, 1 = never, 2 = ask.
# Calc Content/Update/Link (ScLkUpdMode): 0 = always, 1 = never, 2 = on request.
# Writer Content/Update/Link (SfxLinkUpdateMode): 0 = never, 1 = manual, 2 = automatic.
# MacroSecurityLevel 3 = very high (only signed macros from trusted locations, and there are none).
_PROFILE_XCU = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<oor:items xmlns:oor="http://openoffice.org/2001/registry"'
    ' xmlns:xs="http://www.w3.org/2001/XMLSchema"'
    ' xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">\n'
    '<item oor:path="/org.openoffice.Office.Calc/Formula/Load">'
    '<prop oor:name="OOXMLRecalcMode" oor:op="fuse"><value>0</value></prop></item>\n'
    '<item oor:path="/org.openoffice.Office.Calc/Formula/Load">'
    '<prop oor:name="ODFRecalcMode" oor:op="fuse"><value>0</value></prop></item>\n'
    '<item oor:path="/org.openoffice.Office.Calc/Content/Update">'
    '<prop oor:name="Link" oor:op="fuse"><value>1</value></prop></item>\n'
    '<item oor:path="/org.openoffice.Office.Writer/Content/Update">'
    '<prop oor:name="Link" oor:op="fuse"><value>0</value></prop></item>\n'
    '<item oor:path="/org.openoffice.Office.Common/Security/Scripting">'
    '<prop oor:name="MacroSecurityLevel" oor:op="fuse"><value>3</value></prop></item>\n'
    '<item oor:path="/org.openoffice.Office.Common/Security/Scripting">'
    '<prop oor:name="DisableMacrosExecution" oor:op="fuse"><value>true</value></prop></item>\n'
    '<item oor:path="/org.openoffice.Office.Common/Security/Scripting">'
    '<prop oor:name="BlockUntrustedRefererLinks" oor:op="fuse">'
    "<value>true</value></prop></item>\n"
    "</oor:items>\n"
)


_PASSED_TO_SOFFICE = ("PATH", "LANG", "LANGUAGE", "TZ", "TMPDIR")


def soffice_env(home: str) -> dict[str, str]:
    """LibreOffice's whole environment: ``PATH``, locale, time zone and ``TMPDIR`` of the
    server's, and ``HOME`` at ``home`` (the throw-away profile).

    It opens the agent's workbook on the host, unsandboxed; the server's token and API
    keys (``ANALYST_ENV_TOKEN``, a judge's key, cloud credentials) stay out of its reach.
    """
    kept = {
        name: value
        for name, value in os.environ.items()
        if name in _PASSED_TO_SOFFICE or name.startswith("LC_")
    }
    return {**kept, "HOME": home}


class RecalcError(RuntimeError):
    """LibreOffice is missing, failed, timed out, or produced no output."""


_FORMULA_ELEMENT = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?f[\s>/]")
"""A cell formula (``<f>``, ``<f t="shared" .../>``, or with a namespace prefix) in sheet XML."""


def has_formulas(data: bytes) -> bool:
    """Whether an xlsx package holds any cell formula (in any worksheet part).

    A workbook without formulas has nothing to recalculate: its cell values are
    what was saved, so a scorer can skip the LibreOffice start (1-3 s) for it.
    A package that cannot be read counts as having formulas (the caller then
    recalculates, or fails, as it would have).

    Example:
        >>> import openpyxl
        >>> wb = openpyxl.Workbook()
        >>> wb.active.append([1, 2])
        >>> out = io.BytesIO()
        >>> wb.save(out)
        >>> has_formulas(out.getvalue())
        False
        >>> wb.active["C1"] = "=A1+B1"
        >>> wb.save(out := io.BytesIO())
        >>> has_formulas(out.getvalue())
        True
    """
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as package:
            return any(
                _FORMULA_ELEMENT.search(package.read(info))
                for info in package.infolist()
                if info.filename.startswith("xl/worksheets/") and info.filename.endswith(".xml")
            )
    except (zipfile.BadZipFile, OSError, ValueError, KeyError):
        return True


def soffice_path() -> str | None:
    """The LibreOffice executable (``$ANALYST_ENV_SOFFICE``, else ``soffice`` on PATH), or None."""
    configured = os.environ.get("ANALYST_ENV_SOFFICE")
    if configured:
        runnable = os.path.isfile(configured) and os.access(configured, os.X_OK)
        return configured if runnable else None  # a directory is "executable" too
    return shutil.which("soffice") or shutil.which("libreoffice")


RECALCULATING_SCORERS = frozenset({"workbook_match"})
"""Scorers that read computed cell values: every workbook task's instruction says formulas
are fine, and SheetCopilot references hold formula cells saved without values."""


def needs_recalculation(task) -> bool:
    """Whether scoring ``task`` needs a formula engine (its scorer recalculates workbooks).

    Example:
        >>> from analyst_env.task_format import Task, VerifierSpec
        >>> spec = VerifierSpec(name="workbook_match")
        >>> needs_recalculation(Task(id="t", instruction="", answer={}, oracle_answer="",
        ...                          verifier=spec))
        True
    """
    verifier = task.verifier
    return (
        verifier.name in RECALCULATING_SCORERS and verifier.params.get("recalc", True) is not False
    )


def recalculation_refusal(task) -> str | None:
    """Why ``task`` cannot be served here (it needs recalculation and there is no LibreOffice),
    or None. Served anyway, a formula the agent wrote could never be checked: scored 0."""
    if not needs_recalculation(task) or soffice_path() is not None:
        return None
    return (
        f"task {task.id} cannot be served: its workbook is scored on computed formula values "
        "and LibreOffice (soffice) is not installed here; install Debian "
        "'libreoffice-calc-nogui' (or set ANALYST_ENV_SOFFICE)"
    )


def recalculate_bytes(
    data: bytes, suffix: str = ".xlsx", timeout_s: float = DEFAULT_TIMEOUT_S
) -> bytes:
    """Recalculate every formula of a workbook and return the saved xlsx bytes.

    Args:
        data: The workbook's bytes (xlsx, or anything LibreOffice opens).
        suffix: File suffix telling LibreOffice the input format.
        timeout_s: Seconds before LibreOffice is killed.

    Returns:
        An xlsx whose formula cells carry freshly computed cached values.

    Raises:
        RecalcError: If LibreOffice is not installed, fails or times out.
    """
    with tempfile.TemporaryDirectory(prefix="analyst-recalc-") as tmp:
        src = Path(tmp) / f"input{suffix}"
        src.write_bytes(data)
        return recalculate_files([src], Path(tmp) / "out", timeout_s=timeout_s)[0].read_bytes()


def recalculate_files(
    paths: list[Path], outdir: Path, timeout_s: float = DEFAULT_TIMEOUT_S
) -> list[Path]:
    """Recalculate several workbooks in one LibreOffice start (xlsx out, same stem).

    Args:
        paths: Input workbooks; their stems must be distinct.
        outdir: Where the recalculated ``<stem>.xlsx`` files are written.
        timeout_s: Seconds before LibreOffice is killed.

    Returns:
        The output paths, in input order.

    Raises:
        RecalcError: If LibreOffice is not installed, fails, times out or skips a file.
    """
    exe = soffice_path()
    if exe is None:
        raise RecalcError(
            "LibreOffice (soffice) is not installed; install Debian 'libreoffice-calc-nogui'"
        )
    if len({p.stem for p in paths}) != len(paths):
        raise RecalcError("input workbooks must have distinct file stems")
    outdir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="analyst-lo-profile-") as profile:
        user = Path(profile) / "user"
        user.mkdir()
        (user / "registrymodifications.xcu").write_text(_PROFILE_XCU)
        cmd = [
            exe,
            f"-env:UserInstallation={Path(profile).as_uri()}",
            "--headless",
            "--norestore",
            "--nologo",
            "--convert-to",
            "xlsx:Calc MS Excel 2007 XML",
            "--outdir",
            str(outdir),
            *map(str, paths),
        ]
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=soffice_env(profile),
        )
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise RecalcError(f"LibreOffice timed out after {timeout_s:g} s") from None
    results = [outdir / f"{p.stem}.xlsx" for p in paths]
    missing = [r.name for r in results if not r.is_file()]
    if proc.returncode != 0 or missing:
        msg = (err or out).decode(errors="replace").strip()[-500:]
        raise RecalcError(f"LibreOffice failed (exit {proc.returncode}, missing {missing}): {msg}")
    return results
