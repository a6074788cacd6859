"""The starter set's result-workbook tasks: at every level, fair, scored from the workbook the agent
saves.

The oracle's code runs in a scratch working directory as the agent's kernel
would run it, and ``workbook_match`` reads the ``result.xlsx`` it saved.
Independent solutions written from the instruction alone (``csv``, ``sqlite3``
SQL, raw ``openpyxl`` cells with spreadsheet formulas, and pandas in the real
sandbox) must score 1.0 too: that shows the instruction says everything the
reference checks. Near misses (a changed number, swapped sheets, numbers as
text, unrounded values) score 0.0.
"""

from __future__ import annotations

import asyncio
import csv
import json
import re
import shutil
import sqlite3
from collections import defaultdict
from pathlib import Path

import openpyxl
import pytest

from analyst_env.client import AnalystEnv
from analyst_env.datasets.starter_set import STARTER_DIR
from analyst_env.server.app import build_app
from analyst_env.server.local_server import BackgroundServer
from analyst_env.server.settings import Settings
from analyst_env.task_format import VerifierSpec
from analyst_env.verifiers import VerifyContext, judge
from analyst_env.verifiers.recalc import soffice_path

needs_soffice = pytest.mark.skipif(
    soffice_path() is None, reason="LibreOffice (soffice) not installed"
)


def books(ds, template=None):
    found = [
        t
        for t in ds.tasks
        if t.verifier.name == "workbook_match"
        and (template is None or t.metadata["template"] == template)
    ]
    assert found, template
    return found


def workdir(tmp_path: Path, task) -> Path:
    """A fresh working directory holding the task's files, as the sandbox gets them."""
    d = tmp_path / task.id
    d.mkdir()
    for name, path in task.files.items():
        shutil.copy(path, d / name)
    return d


def run_oracle(tmp_path: Path, task) -> Path:
    """Run the oracle's cell with the working directory as current directory, as the kernel does."""
    d = workdir(tmp_path, task)
    (step,) = task.oracle_steps
    assert step.tool == "add_and_execute_code_cell"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(d)
        exec(compile(step.arguments["code"], task.id, "exec"), {})
    return d


def grade(task, directory: Path, recalc: bool = False):
    def read(name: str) -> bytes:
        path = directory / name
        if not path.is_file():
            raise FileNotFoundError(name)
        return path.read_bytes()

    spec = VerifierSpec(name=task.verifier.name, params=task.verifier.params | {"recalc": recalc})
    return judge(spec, "done", task.answer, VerifyContext(task_files=task.files, read_file=read))


def reference(task):
    return openpyxl.load_workbook(task.answer["references"][0]["path"])


def save_sheets(directory: Path, sheets: dict[str, list[list]]) -> None:
    wb = openpyxl.Workbook()
    wb.remove(wb.active)
    for name, rows in sheets.items():
        ws = wb.create_sheet(name)
        for row in rows:
            ws.append(row)
    wb.save(directory / "result.xlsx")


# ---- the kind and its metadata ----------------------------------------------------------------


def test_kind_present_at_every_level_from_every_input_kind(starter):
    tasks = books(starter)
    assert len(tasks) >= 30
    for level in ("easy", "medium", "hard"):
        at = [t for t in tasks if t.metadata["level"] == level]
        assert len(at) >= 8, level
        assert {t.metadata["kind"] for t in at} == {"csv", "sqlite", "excel"}, level
    for t in tasks:
        assert t.metadata["output"] == "workbook" and t.oracle_answer == "done"
        assert [ws.title for ws in reference(t).worksheets] == t.metadata["sheets"]
        (name,) = t.files
        if t.metadata["kind"] == "excel":  # a multi-sheet input workbook
            assert len(openpyxl.load_workbook(t.files[name], read_only=True).sheetnames) >= 3
    hard = [t for t in tasks if t.metadata["level"] == "hard"]
    assert all(len(t.metadata["sheets"]) >= 2 and "Pivot" in t.metadata["sheets"] for t in hard)


def test_reference_stays_on_the_host(starter):
    refs_dir = STARTER_DIR / "references"
    for t in books(starter):
        (ref,) = t.answer["references"]
        path = Path(ref["path"])
        assert path.parent == refs_dir and path.is_file()
        assert str(path) not in t.files.values() and list(t.files) != ["result.xlsx"]
        public = json.dumps(t.public_view())
        assert str(path) not in public and path.name not in public and "references/" not in public
        assert ref["check_board"] == {
            str(i + 1): {"cells": {"values": True}} for i in range(len(t.metadata["sheets"]))
        }


def test_instruction_spells_out_every_sheet_and_column(starter):
    for t in books(starter):
        text = t.instruction
        assert "`result.xlsx`" in text and f"`{next(iter(t.files))}`" in text
        positions = [text.index(f"Sheet `{ws.title}`:") for ws in reference(t).worksheets]
        assert positions == sorted(positions), t.id  # described in workbook order
        for ws, start in zip(reference(t).worksheets, positions):
            section = text[start:].split("\n\nSheet `")[0]
            header = [c.value for c in ws[1]]
            listed = re.findall(r"^- `([^`]+)`", section, flags=re.M)
            assert listed == header, (t.id, ws.title)
            assert "Rows: " in section
            for col, name in enumerate(header, start=1):
                values = [ws.cell(r, col).value for r in range(2, ws.max_row + 1)]
                assert None not in values, (t.id, ws.title, name)
                decimals = max(
                    (
                        len(repr(v).split(".")[1])
                        for v in values
                        if isinstance(v, float) and not v.is_integer() and "e" not in repr(v)
                    ),
                    default=0,
                )
                line = next(line for line in section.splitlines() if line.startswith(f"- `{name}`"))
                m = re.search(r"rounded to (\d+) decimal places", line)
                assert decimals <= (int(m.group(1)) if m else 2), (
                    t.id,
                    name,
                )  # unrounded columns come from the file


def test_reference_numbers_never_appear_in_the_instruction(starter):
    for t in books(starter):
        for ws in reference(t).worksheets:
            for row in ws.iter_rows(min_row=2, values_only=True):
                for v in row:
                    if isinstance(v, float) and not v.is_integer():
                        assert not re.search(
                            rf"(?<![\d.]){re.escape(repr(v))}(?!\d)", t.instruction
                        ), (t.id, v)


# ---- scoring ------------------------------------------------------------------------------------


def test_oracle_scores_one_and_null_zero(starter, tmp_path):
    (tmp_path / "null").mkdir()
    for t in books(starter):
        verdict = grade(t, run_oracle(tmp_path, t))
        assert verdict.reward == 1.0, (t.id, verdict.detail)
        untouched = workdir(tmp_path / "null", t)  # the input files only, no result.xlsx
        assert grade(t, untouched).reward == 0.0, t.id


@needs_soffice
def test_oracle_scores_one_after_recalculation(starter, tmp_path):
    """One task per input kind through LibreOffice, as the server scores it."""
    for kind in ("csv", "sqlite", "excel"):
        t = next(
            t
            for t in books(starter)
            if t.metadata["kind"] == kind and t.metadata["level"] == "hard"
        )
        verdict = grade(t, run_oracle(tmp_path, t), recalc=True)
        assert verdict.reward == 1.0, (t.id, verdict.detail)


def _edit(directory: Path, change) -> None:
    wb = openpyxl.load_workbook(directory / "result.xlsx")
    change(wb)
    wb.save(directory / "result.xlsx")


def _first_float(ws):
    return next(c for row in ws.iter_rows(min_row=2) for c in row if isinstance(c.value, float))


@pytest.mark.parametrize(
    "miss",
    [
        "changed number",
        "swapped sheets",
        "number as text",
        "reversed rows",
        "extra sheet",
        "unrounded",
    ],
)
def test_near_misses_score_zero(starter, tmp_path, miss):
    t = books(starter, "wb_fin_pivot_targets")[0]
    d = run_oracle(tmp_path, t)
    if miss == "changed number":
        _edit(
            d,
            lambda wb: setattr(
                _first_float(wb["Targets"]), "value", _first_float(wb["Targets"]).value * 1.01
            ),
        )
    elif miss == "swapped sheets":
        _edit(d, lambda wb: wb._sheets.reverse())
    elif miss == "number as text":
        _edit(d, lambda wb: setattr(wb["Targets"]["B2"], "value", str(wb["Targets"]["B2"].value)))
    elif miss == "reversed rows":

        def flip(wb):
            ws = wb["Pivot"]
            rows = [[c.value for c in r] for r in ws.iter_rows(min_row=2)]
            for i, row in enumerate(reversed(rows), start=2):
                for j, v in enumerate(row, start=1):
                    ws.cell(i, j).value = v

        _edit(d, flip)
    elif miss == "extra sheet":
        _edit(d, lambda wb: wb.create_sheet("Notes"))
    else:  # attainment_pct asked to 1 decimal place, written to 3

        def unround(wb):
            ws = wb["Targets"]
            col = [c.value for c in ws[1]].index("attainment_pct") + 1
            for r in range(2, ws.max_row + 1):
                ws.cell(r, col).value = 100 * ws.cell(r, 2).value / ws.cell(r, 3).value

        _edit(d, unround)
    verdict = grade(t, d)
    assert verdict.reward == 0.0, (miss, verdict.detail)


# ---- independent solutions from the instruction alone -----------------------------------------


def test_csv_summary_solved_with_the_csv_module(starter, tmp_path):
    for t in books(starter, "wb_sales_region_summary"):
        p = t.metadata["params"]
        agg = defaultdict(lambda: [0, 0, 0.0])
        with open(t.files["sales.csv"], newline="") as fh:
            for row in csv.DictReader(fh):
                if row["order_date"].startswith(str(p["year"])) and row["channel"] == p["channel"]:
                    a = agg[row["region"]]
                    a[0] += 1
                    a[1] += int(row["units"])
                    a[2] += float(row["revenue"])
        rows = [["region", "orders", "units", "revenue"]]
        rows += [[r, n, u, round(v, 2)] for r, (n, u, v) in sorted(agg.items())]
        d = workdir(tmp_path, t)
        save_sheets(d, {"Summary": rows})
        assert grade(t, d).reward == 1.0, (t.id, grade(t, d).detail)


def test_sqlite_categories_solved_with_sql(starter, tmp_path):
    for t in books(starter, "wb_retail_city_categories"):
        p = t.metadata["params"]
        con = sqlite3.connect(f"file:{t.files['retail.sqlite']}?mode=ro", uri=True)
        scope = (
            "FROM orders o JOIN customers c ON c.customer_id = o.customer_id "
            "WHERE substr(o.order_date, 1, 4) = ? AND c.city = ?"
        )
        cats = con.execute(
            "SELECT p.category, COUNT(DISTINCT o.order_id), SUM(i.quantity), "
            "ROUND(SUM(i.quantity * p.unit_price * (1 - i.discount)), 4) AS rev "
            "FROM order_items i JOIN products p ON p.product_id = i.product_id "
            "JOIN orders o ON o.order_id = i.order_id JOIN customers c ON c.customer_id = "
            "o.customer_id "
            "WHERE substr(o.order_date, 1, 4) = ? AND c.city = ? AND o.status = 'completed' "
            "GROUP BY p.category ORDER BY rev DESC, p.category",
            (str(p["year"]), p["city"]),
        ).fetchall()
        status = con.execute(
            f"SELECT o.status, COUNT(*) {scope} GROUP BY o.status ORDER BY o.status",
            (str(p["year"]), p["city"]),
        ).fetchall()
        con.close()
        d = workdir(tmp_path, t)
        save_sheets(
            d,
            {
                "Categories": [["category", "orders", "items", "revenue"], *map(list, cats)],
                "Status": [["status", "orders"], *map(list, status)],
            },
        )
        verdict = grade(t, d)
        assert verdict.reward == 1.0, (t.id, verdict.detail)


@needs_soffice
def test_workbook_pivot_solved_from_raw_cells_with_formulas(starter, tmp_path):
    """Totals, gaps and the yes/no column written as formulas; LibreOffice computes them before the
    check."""
    for t in books(starter, "wb_fin_pivot_targets"):
        value = t.metadata["params"]["value"]
        src = openpyxl.load_workbook(t.files["financials.xlsx"], read_only=True)
        cell, revenue = defaultdict(float), defaultdict(float)
        for q in ("Q1", "Q2", "Q3", "Q4"):
            head, *body = src[q].iter_rows(values_only=True)
            for r in (dict(zip(head, row)) for row in body):
                amount = r["revenue"] - r["cost"] if value == "profit" else r[value]
                cell[r["region"], q] += amount
                revenue[r["region"]] += r["revenue"]
        head, *body = src["Targets"].iter_rows(values_only=True)
        target = {r[0]: r[1] for r in body}
        src.close()
        regions = sorted(target)
        pivot = [["region", "Q1", "Q2", "Q3", "Q4", "Total"]]
        for i, reg in enumerate(regions, start=2):
            vals = [
                cell[reg, q] if value == "units" else round(cell[reg, q], 2)
                for q in ("Q1", "Q2", "Q3", "Q4")
            ]
            pivot.append([reg, *vals, f"=ROUND(SUM(B{i}:E{i}),2)"])
        ranked = sorted(regions, key=lambda r: (-(revenue[r] - target[r]), r))
        targets = [["region", "revenue", "target", "gap", "attainment_pct", "met"]]
        for i, reg in enumerate(ranked, start=2):
            targets.append(
                [
                    reg,
                    round(revenue[reg], 2),
                    target[reg],
                    f"=ROUND(B{i}-C{i},2)",
                    f"=ROUND(100*B{i}/C{i},1)",
                    f'=IF(B{i}>=C{i},"yes","no")',
                ]
            )
        d = workdir(tmp_path, t)
        save_sheets(d, {"Pivot": pivot, "Targets": targets})
        assert grade(t, d, recalc=False).reward == 0.0  # formulas have no values until recalculated
        verdict = grade(t, d, recalc=True)
        assert verdict.reward == 1.0, (t.id, verdict.detail)


# ---- over the wire: the agent's own tools in the real sandbox ------------------------------------


@pytest.fixture(scope="module")
def starter_url():
    app = build_app(Settings(dataset="starter", max_sessions=4))
    with BackgroundServer(app) as url:
        yield url


async def _solve(url, task, code):
    async with AnalystEnv(base_url=url, message_timeout_s=180) as env:
        await env.reset(task_id=task.id)
        out = await env.add_and_execute_code_cell(code)
        assert not (out.observation.result or {}).get("is_error"), out.observation.text
        done = await env.final_answer("saved")
        return done.reward, json.dumps(done.observation.model_dump(), default=str)


PANDAS_SOLUTION = """
import pandas as pd
q = pd.read_excel('financials.xlsx', sheet_name={quarter!r})
g = q.groupby('region')[['units', 'revenue', 'cost']].sum().reset_index().sort_values('region')
g['profit'] = g.revenue - g.cost
g[['revenue', 'cost', 'profit']] = g[['revenue', 'cost', 'profit']].round({decimals})
g.to_excel('result.xlsx', sheet_name='Regions', index=False)
print(len(g))
"""


@pytest.mark.live
def test_pandas_in_the_sandbox_scores_one_and_a_wrong_workbook_zero(starter_url, starter):
    t = books(starter, "wb_fin_quarter_regions")[0]
    code = PANDAS_SOLUTION.format(quarter=t.metadata["params"]["quarter"], decimals=2)
    reward, _ = asyncio.run(_solve(starter_url, t, code))
    assert reward == 1.0

    wrong = PANDAS_SOLUTION.format(
        quarter="Q4" if t.metadata["params"]["quarter"] != "Q4" else "Q1", decimals=2
    )
    reward, final = asyncio.run(_solve(starter_url, t, wrong))
    assert reward == 0.0
    for ws in reference(t).worksheets:  # the verdict locates the miss without quoting the reference
        for row in ws.iter_rows(min_row=2, values_only=True):
            for v in row:
                if isinstance(v, float) and not v.is_integer():
                    assert repr(v) not in final, v
