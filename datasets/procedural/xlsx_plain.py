"""The cells of a generated workbook, read with the standard library alone (zipfile, ElementTree).

Both readings of a task's workbook start from these cells, parsed once (``sheets``):
the plain reading (``files.read_plain``) as they are, the pandas reading through
pandas' own dtype inference (``xlsx_pandas``), whose frames a test keeps equal to
``pd.read_excel``'s (openpyxl). This reader is ~5x faster than openpyxl on the small
workbooks the generator writes (openpyxl parses the whole style sheet and theme before
the first cell).

It is strict on purpose: it reads what ``writers.write_xlsx_fast`` writes
(shared, inline and formula strings, numbers and booleans without a number
format) and refuses anything else with :class:`UnsupportedWorkbook`, rather than
guess. Values come back as openpyxl's read-only mode gives them: a number
without a decimal point or an exponent is an ``int``, other numbers are
``float``, an empty cell is ``None``, and each row is padded to the sheet's width.
"""

from __future__ import annotations

import functools
import posixpath
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree as ET

_MAIN = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
_REL = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
_PKG_REL = "{http://schemas.openxmlformats.org/package/2006/relationships}"
_REF = re.compile(r"([A-Z]+)(\d+)$")

Cell = str | int | float | bool | None


class UnsupportedWorkbook(ValueError):
    """The workbook holds something this reader does not read (a styled number, a date cell)."""


def _column(letters: str) -> int:
    n = 0
    for ch in letters:
        n = n * 26 + ord(ch) - 64
    return n


def _number(text: str) -> int | float:
    if "." in text or "E" in text or "e" in text:
        return float(text)
    return int(text)


def _text(node: ET.Element) -> str:
    """A string item's text: its own ``<t>`` and its runs' (``<r><t>``); phonetic runs left out."""
    parts = []
    for child in node:
        if child.tag == f"{_MAIN}t":
            parts.append(child.text or "")
        elif child.tag == f"{_MAIN}r":
            parts.extend(t.text or "" for t in child.iter(f"{_MAIN}t"))
    return "".join(parts)


class Workbook:
    """One workbook's sheets by name; ``rows(name)`` parses a sheet when asked."""

    def __init__(self, path: Path) -> None:
        self._zip = zipfile.ZipFile(path)
        book = ET.fromstring(self._zip.read("xl/workbook.xml"))
        rels = ET.fromstring(self._zip.read("xl/_rels/workbook.xml.rels"))
        targets = {r.get("Id"): r.get("Target", "") for r in rels.iter(f"{_PKG_REL}Relationship")}
        self.sheets: dict[str, str] = {}
        for sheet in book.iter(f"{_MAIN}sheet"):
            target = targets[sheet.get(f"{_REL}id")]
            name = target.lstrip("/") if target.startswith("/") else posixpath.join("xl", target)
            self.sheets[sheet.get("name", "")] = posixpath.normpath(name)
        try:
            strings = ET.fromstring(self._zip.read("xl/sharedStrings.xml"))
            self._strings = [_text(si) for si in strings.iter(f"{_MAIN}si")]
        except KeyError:
            self._strings = []

    def close(self) -> None:
        self._zip.close()

    def __enter__(self) -> Workbook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def rows(self, name: str) -> Iterator[tuple[Cell, ...]]:
        """Every row from row 1 to the last, each padded with ``None`` to the sheet's width."""
        sheet = ET.fromstring(self._zip.read(self.sheets[name]))
        cells: dict[int, dict[int, Cell]] = {}
        width = 0
        for row in sheet.iter(f"{_MAIN}row"):
            for c in row.iter(f"{_MAIN}c"):
                ref = _REF.match(c.get("r", ""))
                if ref is None:
                    raise UnsupportedWorkbook(f"{name}: a cell without a reference")
                col, r = _column(ref.group(1)), int(ref.group(2))
                value = self._value(c, name)
                if value is not None:
                    cells.setdefault(r, {})[col] = value
                    width = max(width, col)
        dimension = sheet.find(f"{_MAIN}dimension")
        if dimension is not None:  # as openpyxl's read-only mode, the stored extent counts
            last = _REF.match(dimension.get("ref", "").split(":")[-1])
            if last is not None:
                width = max(width, _column(last.group(1)))
        height = max(cells, default=0)
        for r in range(1, height + 1):
            row_cells = cells.get(r, {})
            yield tuple(row_cells.get(col) for col in range(1, width + 1))

    def _value(self, c: ET.Element, sheet: str) -> Cell:
        kind = c.get("t", "n")
        v = c.find(f"{_MAIN}v")
        if kind == "inlineStr":
            inline = c.find(f"{_MAIN}is")
            return None if inline is None else _text(inline)
        if v is None or v.text is None:
            return None
        if kind == "s":
            return self._strings[int(v.text)]
        if kind in ("str", "e"):
            return v.text
        if kind == "b":
            return bool(int(v.text))
        if kind == "n" and c.get("s") in (None, "0"):
            return _number(v.text)
        raise UnsupportedWorkbook(
            f"{sheet}!{c.get('r')}: a cell of type {kind!r} with style {c.get('s')!r}"
        )


def sheets(path: Path, names: tuple[str, ...]) -> dict[str, tuple[tuple[Cell, ...], ...]]:
    """The rows of the sheets ``names`` (as ``Workbook.rows`` gives them), parsed once per
    version of the file: the generator reads a workbook it wrote twice, once for each engine
    (``files.read_plain`` and ``xlsx_pandas.read_sheets``).

    Raises:
        UnsupportedWorkbook: The workbook holds a cell this reader does not read.
    """
    stat = path.stat()
    return _parsed(str(path), stat.st_ino, stat.st_mtime_ns, stat.st_size, names)


@functools.lru_cache(maxsize=4)
def _parsed(
    path: str, inode: int, mtime_ns: int, size: int, names: tuple[str, ...]
) -> dict[str, tuple[tuple[Cell, ...], ...]]:
    with Workbook(Path(path)) as book:
        return {name: tuple(book.rows(name)) for name in names}


__all__ = ["UnsupportedWorkbook", "Workbook", "sheets"]
