"""How the plain engine reads one stored cell: blank, a number, a day, a duplicate's signature.

Cells come as a reader returns them (``csv`` text, SQLite's typed values, the workbook
reader's ``int``/``float``/``str``/``bool``), so each reader here takes the exact types
first: these run for every cell of a table, in every attempt's plain reading.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any


def blank(cell: Any) -> bool:
    """Whether a cell holds nothing: ``None``, NaN or only whitespace."""
    if cell is None:
        return True
    kind = type(cell)  # the exact types a reader returns first: this runs for every cell
    if kind is str:
        return not cell.strip()
    if kind is int:
        return False
    if kind is float:
        return math.isnan(cell)
    return (isinstance(cell, str) and cell.strip() == "") or (
        isinstance(cell, float) and math.isnan(cell)
    )


def as_seen(cell: Any) -> str | None:
    """A cell as two rows are compared for duplicates: its text, or None where it is blank."""
    if type(cell) is str:  # a csv cell, the commonest: its own text
        return cell if cell.strip() else None
    return None if blank(cell) else str(cell)


def signature(row: dict[str, Any]) -> tuple[str | None, ...]:
    """A row as duplicates are found: every cell as seen, in column order."""
    return tuple(map(as_seen, row.values()))


def number(cell: Any) -> float | None:
    """A cell as a number (``$`` and thousands commas dropped), or None: blank or not a number."""
    kind = type(cell)  # a plain number or a plain numeral first: this runs for most cells
    if kind is float:
        return None if math.isnan(cell) else cell
    if kind is int:
        return float(cell)
    if kind is str and cell and cell[-1] in _DIGITS and cell[0] in _DIGITS:
        try:
            return float(cell)
        except ValueError:
            pass
    if blank(cell):
        return None
    if isinstance(cell, (int, float)):
        return float(cell)
    try:
        return float(str(cell).replace("$", "").replace(",", ""))
    except ValueError:
        return None


_DIGITS = frozenset("0123456789")


def day(cell: Any) -> dt.date | None:
    """A cell as a calendar day: ``YYYY-MM-DD``, ``DD/MM/YYYY`` or a local timestamp with its
    offset (read as its UTC day); None for anything else."""
    written = str(cell).strip()
    try:
        if len(written) == 10 and written[4] == "-" and written[7] == "-":
            return dt.date(int(written[:4]), int(written[5:7]), int(written[8:]))
        if len(written) == 10 and written[2] == "/" and written[5] == "/":
            return dt.date(int(written[6:]), int(written[3:5]), int(written[:2]))
        if (
            len(written) > 10 and written[10] == "T"
        ):  # a local timestamp with its offset: the UTC day
            instant = dt.datetime.fromisoformat(written)
            if instant.tzinfo is not None:
                return instant.astimezone(dt.UTC).date()
    except ValueError:
        return None
    return None


def text(cell: Any) -> str:
    """A cell as text, as keys and labels are compared."""
    return str(cell)


__all__ = ["as_seen", "blank", "day", "number", "signature", "text"]
