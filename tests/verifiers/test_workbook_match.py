"""workbook_match on synthetic workbooks: values, formulas needing recalculation, any-of references,
edges."""

from __future__ import annotations

import io
import time

import openpyxl
import pytest

from analyst_env.task_format import VerifierSpec
from analyst_env.verifiers import VerifyContext, judge
from analyst_env.verifiers.recalc import RecalcError, recalculate_bytes, soffice_path

needs_soffice = pytest.mark.skipif(
    soffice_path() is None, reason="LibreOffice (soffice) not installed: no formula recalculation"
)

BOARD = {"1": {"cells": {"values": True, "formatting": False}, "charts": {"title": False}}}


def book(rows: list[list], extra_sheets: int = 0) -> bytes:
    wb = openpyxl.Workbook()
    for row in rows:
        wb.active.append(row)
    for i in range(extra_sheets):
        wb.create_sheet(f"Extra{i}")
    out = io.BytesIO()
    wb.save(out)
    return out.getvalue()


@pytest.fixture(scope="module")
def refs(tmp_path_factory):
    """Two accepted references: a Total column as values, and the same with a Profit column
    instead."""
    d = tmp_path_factory.mktemp("refs")
    (d / "gt1.xlsx").write_bytes(
        book([["Week", "Sales", "Total"], ["W1", 10, 0.3], ["W2", 20, 30.5]])
    )
    (d / "gt2.xlsx").write_bytes(book([["Week", "Sales", "Profit"], ["W1", 10, 1], ["W2", 20, 2]]))
    return [
        {"name": "gt1", "path": str(d / "gt1.xlsx"), "check_board": BOARD},
        {"name": "gt2", "path": str(d / "gt2.xlsx"), "check_board": BOARD},
    ]


def score(refs, data: bytes | None, *, recalc: bool = False) -> float:
    def read(name: str) -> bytes:
        if data is None or name != "w.xlsx":
            raise FileNotFoundError(name)
        return data

    spec = VerifierSpec(name="workbook_match", params={"recalc": recalc})
    gold = {"workbook": "w.xlsx", "references": refs}
    return judge(spec, "done", gold, VerifyContext(read_file=read)).reward


def test_exact_values_match_the_first_reference(refs):
    assert score(refs, book([["Week", "Sales", "Total"], ["W1", 10, 0.3], ["W2", 20, 30.5]])) == 1.0


def test_any_reference_is_accepted(refs):
    assert score(refs, book([["Week", "Sales", "Profit"], ["W1", 10, 1.0], ["W2", 20, 2.0]])) == 1.0


def test_columns_are_matched_by_header_and_strings_stripped(refs):
    assert (
        score(refs, book([["Total", "Week", "Sales"], [0.3, " W1 ", 10], [30.5, "W2", 20]])) == 1.0
    )


def test_tolerance_edges_follow_np_allclose(refs):
    # upstream: np.allclose(gold, got, atol=1e-8) with numpy's default rtol=1e-5 relative to got
    assert (
        score(refs, book([["Week", "Sales", "Total"], ["W1", 10, 0.3 + 5e-9], ["W2", 20, 30.5]]))
        == 1.0
    )
    assert (
        score(refs, book([["Week", "Sales", "Total"], ["W1", 10, 0.3], ["W2", 20, 30.5 + 2e-4]]))
        == 1.0
    )
    assert (
        score(refs, book([["Week", "Sales", "Total"], ["W1", 10, 0.3], ["W2", 20, 30.5 + 1e-3]]))
        == 0.0
    )


def test_wrong_values_types_and_shapes_score_zero(refs):
    assert score(refs, book([["Week", "Sales", "Total"], ["W1", 10, 0.3], ["W2", 20, 31]])) == 0.0
    assert (
        score(refs, book([["Week", "Sales", "Total"], ["W1", 10, "0.3"], ["W2", 20, 30.5]])) == 0.0
    )
    assert score(refs, book([["Week", "Sales", "Total"], ["W1", 10, 0.3]])) == 0.0
    assert (
        score(
            refs,
            book([["Week", "Sales", "Total"], ["W1", 10, 0.3], ["W2", 20, 30.5]], extra_sheets=1),
        )
        == 0.0
    )


def test_unchanged_input_missing_and_malformed_files_score_zero(refs):
    assert score(refs, book([["Week", "Sales"], ["W1", 10], ["W2", 20]])) == 0.0
    assert score(refs, None) == 0.0
    assert score(refs, b"not a workbook") == 0.0
    assert score(refs, b"PK\x03\x04 truncated zip") == 0.0


def test_a_cell_in_the_sheets_last_corner_is_read_quickly_and_left_outside_the_table(refs):
    def cornered(total: float) -> bytes:
        wb = openpyxl.Workbook()
        for row in [["Week", "Sales", "Total"], ["W1", 10, 0.3], ["W2", 20, total]]:
            wb.active.append(row)
        wb.active.cell(1_048_576, 16_384).value = 1  # a 5 KB file whose bounding box is every cell
        out = io.BytesIO()
        wb.save(out)
        return out.getvalue()

    started = time.monotonic()
    assert score(refs, cornered(31.0)) == 0.0
    assert score(refs, cornered(30.5)) == 1.0  # the table is A1's region (upstream's rule)
    assert time.monotonic() - started < 5.0


def test_verdict_names_each_reference(refs):
    verdict = judge(
        VerifierSpec(name="workbook_match", params={"recalc": False}),
        "",
        {"workbook": "w.xlsx", "references": refs},
        VerifyContext(
            read_file=lambda name: book([["Week", "Sales", "Profit"], ["W1", 10, 1], ["W2", 20, 2]])
        ),
    )
    assert verdict.components == {"reference 1": 0.0, "reference 2": 1.0}
    assert "reference 1: sheet 1" in verdict.detail and "gt1" not in verdict.detail


@needs_soffice
def test_formulas_without_cached_values_are_recalculated(refs):
    formulas = book([["Week", "Sales", "Profit"], ["W1", 10, "=B2/10"], ["W2", 20, "=B3/10"]])
    assert score(refs, formulas, recalc=False) == 0.0  # openpyxl saved no cached values
    assert score(refs, formulas, recalc=True) == 1.0
    wrong = book([["Week", "Sales", "Profit"], ["W1", 10, "=B2/5"], ["W2", 20, "=B3/5"]])
    assert score(refs, wrong, recalc=True) == 0.0


@needs_soffice
def test_reference_without_cached_values_is_scored_on_its_recalculation(tmp_path):
    (tmp_path / "gt.xlsx").write_bytes(book([["A", "B"], [2, "=A2*3"]]))
    refs = [{"name": "gt", "path": str(tmp_path / "gt.xlsx"), "check_board": BOARD}]
    assert score(refs, book([["A", "B"], [2, 6]]), recalc=True) == 1.0
    assert score(refs, book([["A", "B"], [2, 7]]), recalc=True) == 0.0


@needs_soffice
def test_recalculate_bytes_fills_cached_values():
    out = recalculate_bytes(book([["x", "=1+2"]]))
    assert openpyxl.load_workbook(io.BytesIO(out), data_only=True).active["B1"].value == 3


def test_missing_engine_is_a_clear_error_and_scoring_goes_on_without_it(
    refs, monkeypatch, tmp_path
):
    monkeypatch.setenv("ANALYST_ENV_SOFFICE", str(tmp_path / "no-soffice"))
    with pytest.raises(RecalcError, match="not installed"):
        recalculate_bytes(book([["x", 1]]))
    values = book([["Week", "Sales", "Total"], ["W1", 10, 0.3], ["W2", 20, 30.5]])
    assert score(refs, values, recalc=True) == 1.0


def test_libreoffice_gets_none_of_the_servers_secrets(monkeypatch, tmp_path):
    # It opens the agent's workbook on the host, unsandboxed: whatever a malformed file could
    # make it do, it must not find the token or an API key in its environment.
    dump = tmp_path / "environ"
    fake = tmp_path / "soffice"
    fake.write_text(f"#!/bin/sh\nenv > {dump}\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("ANALYST_ENV_SOFFICE", str(fake))
    monkeypatch.setenv("ANALYST_ENV_TOKEN", "tok-recalc-secret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-recalc-secret")
    with pytest.raises(RecalcError):
        recalculate_bytes(book([["x", "=1+2"]]))
    environ = dump.read_text()
    assert "recalc-secret" not in environ, environ
    assert "PATH=" in environ and "HOME=" in environ


def test_a_workbook_without_formulas_is_scored_without_starting_libreoffice(refs, monkeypatch):
    from analyst_env.verifiers import workbook_match as wm

    started: list[int] = []

    def recalculate(blobs, timeout_s):
        started.append(len(blobs))
        raise RecalcError("stand-in: LibreOffice not started")

    monkeypatch.setattr(wm, "_recalculate", recalculate)
    values = book([["Week", "Sales", "Total"], ["W1", 10, 0.3], ["W2", 20, 30.5]])
    assert score(refs, values, recalc=True) == 1.0
    assert started == []
    formulas = book([["Week", "Sales", "Total"], ["W1", 10, "=0.3"], ["W2", 20, 30.5]])
    score(refs, formulas, recalc=True)
    assert started == [3]  # a formula in the result: the result and both references


def test_has_formulas_sees_shared_and_prefixed_formulas_and_treats_junk_as_formulas():
    from analyst_env.verifiers.recalc import has_formulas

    assert not has_formulas(book([["a", 1, "<f> is text here, not a formula"]]))  # escaped in XML
    assert has_formulas(book([["a", "=SUM(1,2)"]]))
    assert has_formulas(b"not a zip")


def test_the_agents_workbook_is_opened_once_when_nothing_recalculates_it(refs, monkeypatch):
    """Opening is most of the cost of a large workbook (a 24 MB sheet: about ten seconds)."""
    from analyst_env.verifiers import workbook_match as wm

    values = book([["Week", "Sales", "Total"], ["W1", 10, 0.3], ["W2", 20, 30.5]])
    opened: list[bytes] = []
    load = wm._load_values
    monkeypatch.setattr(wm, "_load_values", lambda data: (opened.append(data), load(data))[1])
    assert score(refs, values) == 1.0
    assert opened.count(values) == 1


def test_a_workbook_the_reader_refuses_scores_zero_without_raising(refs):
    """The server's reader refuses a symbolic link, a directory or a file over the cap with an
    OSError; raised out of the scorer, it retired the scoring worker."""

    def refuse(name: str) -> bytes:
        raise OSError(f"{name} is not a regular file")

    gold = {"workbook": "w.xlsx", "references": refs}
    verdict = judge(VerifierSpec(name="workbook_match"), "", gold, VerifyContext(read_file=refuse))
    assert verdict.reward == 0.0 and "not a regular file" in verdict.detail
