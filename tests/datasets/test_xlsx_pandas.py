"""The gold's reading of a workbook: the frames ``pd.read_excel`` (openpyxl) gives, dtypes included.

The generator computes the reference answer from ``xlsx_pandas.read_sheets``, while an
agent calls ``pd.read_excel``: any difference between the two frames would be a gold the
agent's own reading cannot reach. Checked on generated workbooks of many templates and
on a workbook of the values a reader is likeliest to get wrong.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analyst_env.datasets.procedural import ProceduralDataset, xlsx_pandas
from analyst_env.datasets.procedural.writers import write_xlsx_fast
from analyst_env.datasets.procedural.xlsx_plain import Workbook

WORKBOOKS = 40


def _sheet_names(path: Path) -> list[str]:
    with Workbook(path) as book:
        return list(book.sheets)


def assert_read_as_read_excel(path: Path) -> None:
    sheets = _sheet_names(path)
    ours = xlsx_pandas.read_sheets(path, sheets)
    theirs = pd.read_excel(path, sheet_name=sheets, engine="openpyxl")
    assert list(ours) == list(theirs)
    for name in sheets:
        pd.testing.assert_frame_equal(ours[name], theirs[name], check_exact=True)


def test_generated_workbooks_read_as_read_excel_reads_them(tmp_path) -> None:
    ds = ProceduralDataset(31337, cache_dir=tmp_path / "cache")
    books: list[Path] = []
    templates: set[str] = set()
    index = 0
    while len(books) < WORKBOOKS:
        task = ds.task("train", index)
        index += 1
        found = [Path(p) for p in task.files.values() if p.endswith(".xlsx")]
        books += found
        if found:
            templates.add(task.metadata["template"])
    assert len(templates) >= 10, templates  # many templates' columns, not one table's
    for path in books:
        assert_read_as_read_excel(path)


def test_values_readers_disagree_on_read_as_read_excel(tmp_path) -> None:
    # Integral floats (read back as ints), text that looks like a number, a leading zero,
    # booleans, missing cells (a column all empty, a last row all empty), huge and tiny
    # numbers, negative zero, unicode and a column named like a number.
    fact = pd.DataFrame(
        {
            "id": [1, 2, 3, 4],
            "amount": [1.0, 2.5, -0.0, 1e20],
            "code": ["007", "12", "1,234", "1e3"],
            "flag": [True, False, None, True],
            "note": [None, "Zoë", "", "  padded "],
            "tiny": [1e-300, 3.14159, np.nan, 42.0],
            "2024": [None, None, None, None],
            "huge": [1e20, 2e20, 3e20, 4e20],
        }
    )
    dim = pd.DataFrame({"key": ["a", "b"], "empty": [None, None]})
    last_row_empty = pd.DataFrame({"a": [1, None], "b": ["x", None]})
    path = tmp_path / "edge.xlsx"
    write_xlsx_fast({"fact": fact, "dim": dim, "tail": last_row_empty}, path)
    assert_read_as_read_excel(path)


def test_blank_styled_cells_past_the_data_are_trimmed_as_read_excel_trims_them(tmp_path) -> None:
    # Rows and columns holding only blank (formatted, valueless) cells: pandas drops
    # trailing ones, keeps inner ones as empty.
    import xlsxwriter

    path = tmp_path / "blanks.xlsx"
    book = xlsxwriter.Workbook(str(path))
    bold = book.add_format({"bold": True})
    sheet = book.add_worksheet("sheet")
    sheet.write_row(0, 0, ["a", "b"])
    sheet.write_row(1, 0, [1, "x"])
    sheet.write_blank(2, 0, None, bold)  # an inner empty row
    sheet.write_row(3, 0, [2, "y"])
    sheet.write_blank(4, 0, None, bold)  # trailing empty rows and a trailing empty column
    sheet.write_blank(5, 3, None, bold)
    book.close()
    assert_read_as_read_excel(path)
    assert len(xlsx_pandas.read_sheets(path, ["sheet"])["sheet"]) == 3


def test_a_workbook_the_plain_reader_refuses_is_read_by_read_excel(tmp_path) -> None:
    # A date cell carries a number format: the plain reader refuses it rather than guess,
    # and the gold's reading falls back to pd.read_excel itself.
    frame = pd.DataFrame({"day": pd.to_datetime(["2024-01-02", "2024-03-04"]), "n": [1, 2]})
    path = tmp_path / "dates.xlsx"
    write_xlsx_fast({"sheet": frame}, path)
    sheets = xlsx_pandas.read_sheets(path, ["sheet"])
    assert str(sheets["sheet"]["day"].dtype).startswith("datetime64")
    assert_read_as_read_excel(path)


@pytest.mark.parametrize("sheets", [["tail"], ["fact", "tail"]])
def test_only_the_sheets_asked_for_come_back(tmp_path, sheets) -> None:
    frame = pd.DataFrame({"a": [1, 2]})
    path = tmp_path / "three.xlsx"
    write_xlsx_fast({"fact": frame, "dim": frame, "tail": frame}, path)
    assert list(xlsx_pandas.read_sheets(path, sheets)) == sheets
