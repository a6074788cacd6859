"""File previews for every kind, caching, and never raising."""

import sqlite3

import pandas as pd

from analyst_env.datasets import describe_file
from analyst_env.datasets.preview import _cached_preview


def test_csv_preview(tmp_path):
    p = tmp_path / "a.csv"
    p.write_text('x,y\n1,"multi\nline"\n2,b\n')
    info = describe_file("data/a.csv", str(p))
    assert info.name == "data/a.csv" and info.kind == "csv"
    assert info.size_bytes == p.stat().st_size
    assert info.preview == {"columns": ["x", "y"], "rows": 2}


def test_tsv_preview(tmp_path):
    p = tmp_path / "a.tsv"
    p.write_text("x\ty\n1\t2\n")
    assert describe_file("a.tsv", str(p)).preview == {"columns": ["x", "y"], "rows": 1}


def test_sqlite_preview(tmp_path):
    p = tmp_path / "d.sqlite"
    con = sqlite3.connect(p)
    con.execute('CREATE TABLE "my table" (id INTEGER, name TEXT)')
    con.executemany('INSERT INTO "my table" VALUES (?, ?)', [(1, "a"), (2, "b")])
    con.execute("CREATE TABLE empty (v REAL)")
    con.commit()
    con.close()
    info = describe_file("d.sqlite", str(p))
    assert info.kind == "sqlite"
    assert info.preview == {
        "tables": {
            "empty": {"columns": ["v"], "rows": 0},
            "my table": {"columns": ["id", "name"], "rows": 2},
        }
    }


def test_excel_preview(tmp_path):
    p = tmp_path / "w.xlsx"
    with pd.ExcelWriter(p) as xw:
        pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]}).to_excel(
            xw, sheet_name="S1", index=False
        )
        pd.DataFrame({2024: [1.5]}).to_excel(xw, sheet_name="S2", index=False)
    info = describe_file("w.xlsx", str(p))
    assert info.kind == "excel"
    assert info.preview == {
        "sheets": {"S1": {"columns": ["a", "b"], "rows": 3}, "S2": {"columns": ["2024"], "rows": 1}}
    }


def test_other_kinds(tmp_path):
    (tmp_path / "n.json").write_text("[1, 2, 3]")
    (tmp_path / "r.md").write_text("a\nb\n")
    (tmp_path / "x.parquet").write_bytes(b"PAR1")
    assert describe_file("n.json", str(tmp_path / "n.json")).preview == {
        "type": "array",
        "length": 3,
    }
    assert describe_file("r.md", str(tmp_path / "r.md")).kind == "text"
    other = describe_file("x.parquet", str(tmp_path / "x.parquet"))
    assert other.kind == "other" and other.preview == {}


def test_unreadable_files_give_error_preview(tmp_path):
    for name, data in [
        ("bad.sqlite", b"not a database" * 10),
        ("bad.xlsx", b"PK garbage"),
        ("bad.xls", b"\xd0\xcf\x11\xe0"),
        ("bad.json", b"{oops"),
    ]:
        p = tmp_path / name
        p.write_bytes(data)
        info = describe_file(name, str(p))
        assert "error" in info.preview, name
    missing = describe_file("gone.csv", str(tmp_path / "gone.csv"))
    assert missing.size_bytes == 0 and "error" in missing.preview


def test_cache_invalidated_by_change(tmp_path):
    p = tmp_path / "c.csv"
    p.write_text("a\n1\n")
    assert describe_file("c.csv", str(p)).preview["rows"] == 1
    hits = _cached_preview.cache_info().hits
    describe_file("c.csv", str(p))
    assert _cached_preview.cache_info().hits == hits + 1
    p.write_text("a\n1\n2\n3\n")
    assert describe_file("c.csv", str(p)).preview["rows"] == 3


def test_starter_files_preview(starter):
    seen = set()
    for t in starter.tasks:
        for name, path in t.files.items():
            info = describe_file(name, path)
            assert "error" not in info.preview, name
            seen.add(info.kind)
    assert seen == {"csv", "sqlite", "excel"}
