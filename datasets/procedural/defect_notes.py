"""The sentences that tell the agent about a file's defects and how to repair them.

Each defect drawn for a task (duplicated rows, numbers stored as text, mixed
units, blanks, mixed date formats, time zones, keys missing from the lookup
table) changes the answer; the instruction states the rule for each one, so the
answer is defined by the question rather than by a guess about intent.
"""

from __future__ import annotations

from analyst_env.datasets.procedural.domain_schema import Domain
from analyst_env.datasets.procedural.grammar import article
from analyst_env.datasets.procedural.tables import ALT_UNITS, Mess, unit_col


def defect_notes(d: Domain, mess: Mess, has_dim: bool) -> list[str]:
    m1, notes = f"`{d.m1.name}`", []
    if mess.duplicates:
        notes.append(
            "Some rows are exact copies of an earlier row (a record entered twice): count each "
            "record "
            "once."
        )
    if mess.text_numbers:
        sign = " and a $ sign" if d.m1.unit == "dollars" else ""
        notes.append(
            f"{m1} is stored as text with thousands separators{sign}; read it as a number."
        )
    if mess.units:
        base, other, factor = ALT_UNITS[d.m1.unit]
        notes.append(
            f"{m1} is recorded in {base} or in {other}, as `{unit_col(d)}` says ({factor} "
            f"{other} = "
            f"1 {base}); work in {base}."
        )
    if mess.missing:
        notes.append(
            f"Blank {m1} cells are missing values: leave them out of any calculation on {m1} (a "
            f"blank "
            "is not above or below any threshold)."
        )
    if mess.mixed_dates:
        notes.append(f"`{d.date_col}` is written either as YYYY-MM-DD or as DD/MM/YYYY.")
    if mess.timezones:
        notes.append(
            f"`{d.date_col}` is the local time of the site that recorded it, with its UTC "
            "offset; a record's date is its calendar date in UTC."
        )
    if has_dim:
        notes.append(
            f"{article(f'`{d.key}`', capital=True)} missing from the lookup table has no "
            f"`{d.attr[0]}`: leave its rows "
            f"out of "
            f"anything about `{d.attr[0]}`."
        )
    return notes
