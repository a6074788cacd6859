"""The plan a procedural task was made from, kept on the host beside its files: what a solution
is built from.

The generator writes ``plan.json`` into the task's own cache folder (like the
reference workbooks in ``references/``): the query the template computed, the
column name of every role, the file layout and the defects written. It is not
part of the ``Task`` record, so ``Task.public_view``, the Task API and every
observation never carry it, and the task's ``files`` never name it, so it never
enters a sandbox. ``solutions`` turns it into the tool calls an analyst makes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from analyst_env.datasets.procedural.files import Placement
from analyst_env.datasets.procedural.tables import ALT_UNITS, Mess, unit_col

PLAN_FILE = "plan.json"


def make(template: Any, domain: Any, ask: Any, query: dict, place: Placement, mess: Mess) -> dict:
    """The plan of one attempt as plain JSON data."""
    d = domain
    units = ALT_UNITS.get(d.m1.unit) if mess.units else None
    return {
        "template": template.name,
        "category": template.category,
        "style": ask.style,
        "decimals": ask.decimals,
        "query": {"filters": [list(f) for f in query["filters"]], "op": _jsonable(query["op"])},
        "cols": d.role_columns() | {"unit": unit_col(d)},
        "units": None if units is None else [units[1], units[2]],
        "mess": mess.names(),
        "fact": [place.fact_file, place.fact_table],
        "dim": [place.dim_file, place.dim_table] if place.dim_file else None,
        "sheet": _sheet(ask.sheet),
        "chart": {"kind": ask.what, "order": ask.order} if ask.style == "chart" else None,
    }


def _sheet(sheet: Any) -> dict | None:
    """A workbook answer's sheet as the instruction states it: name, label header, the value
    columns' headers and roundings (``*``: one column per ``g2`` label, then ``Total``)."""
    if sheet is None:
        return None
    return {
        "name": sheet.name,
        "label": sheet.label[0],
        "columns": [[name, decimals] for name, _, decimals in sheet.columns],
        "in_place": sheet.in_place,
    }


def _jsonable(x: Any) -> Any:
    if isinstance(x, (tuple, list)):
        return [_jsonable(v) for v in x]
    return x


def write(directory: Path, plan: dict) -> None:
    (directory / PLAN_FILE).write_text(json.dumps(plan, sort_keys=True) + "\n", encoding="utf-8")


def read(task_folder: Path) -> dict | None:
    """The plan in a task's cache folder, or None (a folder made before plans were kept)."""
    path = task_folder / PLAN_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
