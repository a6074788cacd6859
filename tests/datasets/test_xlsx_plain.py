"""The standard-library workbook reader of the plain engine: openpyxl's values, or a refusal."""

import datetime as dt
import zipfile
from pathlib import Path

import openpyxl
import pandas as pd
import pytest
import xlsxwriter

from analyst_env.datasets.procedural import ProceduralDataset
from analyst_env.datasets.procedural.writers import write_xlsx_fast
from analyst_env.datasets.procedural.xlsx_plain import UnsupportedWorkbook, Workbook


def _typed(rows):
    return [tuple((type(v), v) for v in row) for row in rows]


def _openpyxl_rows(path: Path) -> dict[str, list[tuple]]:
    wb = openpyxl.load_workbook(path, read_only=True, data_only=True)
    try:
        return {name: list(wb[name].iter_rows(values_only=True)) for name in wb.sheetnames}
    finally:
        wb.close()


def test_generated_workbooks_read_as_openpyxl_reads_them(tmp_path):
    ds = ProceduralDataset(31337, cache_dir=tmp_path / "cache")
    books = []
    index = 0
    while len(books) < 12:
        task = ds.task("train", index)
        index += 1
        books += [Path(p) for p in task.files.values() if p.endswith(".xlsx")]
    for path in books:
        expected = _openpyxl_rows(path)
        with Workbook(path) as wb:
            assert list(wb.sheets) == list(expected)
            for name, rows in expected.items():
                assert _typed(wb.rows(name)) == _typed(rows), (path, name)


def test_blanks_booleans_ints_floats_and_padding(tmp_path):
    path = tmp_path / "t.xlsx"
    frame = pd.DataFrame(
        {
            "id": [1, 2, 3],
            "x": [1.5, None, 2.0],
            "ok": [True, False, True],
            "note": ["a", None, " spaced "],
        }
    )
    write_xlsx_fast({"s": frame}, path)
    with Workbook(path) as wb:
        rows = list(wb.rows("s"))
    assert _typed(rows) == _typed(_openpyxl_rows(path)["s"])
    assert rows[2] == (2, None, False, None)  # the row keeps its width where cells are empty
    assert type(rows[1][0]) is int and type(rows[1][1]) is float


def test_inline_strings_are_read(tmp_path):
    path = tmp_path / "inline.xlsx"
    wb = xlsxwriter.Workbook(str(path), {"constant_memory": True})  # strings written inline
    ws = wb.add_worksheet("s")
    ws.write_row(0, 0, ["name", "n"])
    ws.write_row(1, 0, ["Ada", 3])
    wb.close()
    assert b"inlineStr" in zipfile.ZipFile(path).read("xl/worksheets/sheet1.xml")
    with Workbook(path) as book:
        assert list(book.rows("s")) == [("name", "n"), ("Ada", 3)]


def test_a_date_cell_is_refused_rather_than_guessed(tmp_path):
    path = tmp_path / "dated.xlsx"
    wb = openpyxl.Workbook()
    wb.active.title = "s"
    wb.active.append(["when"])
    wb.active.append([dt.datetime(2024, 3, 5)])
    wb.save(path)
    with Workbook(path) as book, pytest.raises(UnsupportedWorkbook, match="style"):
        list(book.rows("s"))


def test_sheets_parses_a_workbook_again_once_it_is_rewritten(tmp_path):
    # The parse is kept per version of the file: a workbook written anew at the same path
    # (a cache slot reused) is read anew, never served from the parse of the old one.
    from analyst_env.datasets.procedural.xlsx_plain import sheets

    path = tmp_path / "book.xlsx"
    write_xlsx_fast({"s": pd.DataFrame({"a": [1, 2]})}, path)
    assert sheets(path, ("s",))["s"] == (("a",), (1,), (2,))
    assert sheets(path, ("s",)) is sheets(path, ("s",))  # parsed once
    path.unlink()
    write_xlsx_fast({"s": pd.DataFrame({"a": [7]})}, path)
    assert sheets(path, ("s",))["s"] == (("a",), (7,))
