"""The plain engine's cell readers: what counts as blank, a number, a day, and a duplicate."""

from __future__ import annotations

import datetime as dt
import math

import pytest

from analyst_env.datasets.procedural import plain_cells as cells


@pytest.mark.parametrize("cell", [None, "", "   ", "\t", math.nan])
def test_blank_cells_read_as_nothing(cell) -> None:
    assert cells.blank(cell) and cells.as_seen(cell) is None and cells.number(cell) is None


def test_a_row_is_the_same_duplicate_however_its_reader_typed_it() -> None:
    # csv gives text, SQLite and the workbook reader give numbers: one row either way.
    assert cells.signature({"a": "7", "b": " ", "c": "x"}) == cells.signature(
        {"a": 7, "b": None, "c": "x"}
    )
    assert cells.signature({"a": "7", "b": "y"}) != cells.signature({"a": "7", "b": "z"})
    assert cells.as_seen(" x ") == " x "  # text is compared as written, spaces included


@pytest.mark.parametrize(
    ("cell", "value"),
    [("1,204.5", 1204.5), ("$1,204.50", 1204.5), (3, 3.0), (2.5, 2.5), ("12", 12.0), ("n/a", None)],
)
def test_numbers_are_read_through_dollars_and_thousands(cell, value) -> None:
    assert cells.number(cell) == value


@pytest.mark.parametrize(
    ("cell", "day"),
    [
        ("2024-03-05", dt.date(2024, 3, 5)),
        ("05/03/2024", dt.date(2024, 3, 5)),
        ("2024-03-05T23:30:00-05:00", dt.date(2024, 3, 6)),  # the UTC day
        ("2024-03-05T01:00:00+09:00", dt.date(2024, 3, 4)),
        ("March 5", None),
        ("2024-13-05", None),
    ],
)
def test_days_are_read_in_every_written_form_and_as_their_utc_day(cell, day) -> None:
    assert cells.day(cell) == day
