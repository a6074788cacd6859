"""The ``starter`` set: the project's own generated tasks over CSV, SQLite and Excel files.

Everything comes from code and a seed: synthetic tables, written
byte-deterministically (``writers``), read back from disk, and asked about by
templates whose answers are computed with pandas. Tidy files (``csv_tables``,
``sqlite_tables``, ``excel_tables``, sharing the pools of ``tables``) get
filtering, aggregation, group-by, join, window and pivot questions
(``sales_tasks``, ``employees_tasks``, ``flights_tasks``, ``sensors_tasks``,
``retail_tasks``, ``university_tasks``, ``excel_tasks``); files with real-world
defects (``messy_tables``) get questions about dirty types, mixed date
formats, duplicates, missing values, time zones and cross-sheet lookups
(``transactions_tasks``, ``events_tasks``, ``support_tasks``, ``budget_tasks``,
``timesheets_tasks``). Result-workbook templates (``workbook_sales``,
``workbook_retail``, ``workbook_financials``, ``workbook_inventory``) ask
the agent to write ``result.xlsx`` (per-group summaries, cleaned tables,
pivots) from a CSV file, a SQLite database or a multi-sheet workbook; they are
scored by ``workbook_match`` against a reference workbook written under
``references/`` on the host only. A template runs a few times with different drawn
parameters; duplicates, ties and questions that would state their own answer
are dropped. New sources and templates are only ever appended, so the ids of
existing tasks stay put. Files and a ``manifest.json`` are cached per generator version
and seed, so only the first load in a cache pays for generation.

Example:
    >>> ds = load_starter()
    >>> len(ds.tasks) >= 300
    True
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analyst_env.datasets.shipped import (
    budget_tasks,
    csv_tables,
    employees_tasks,
    events_tasks,
    excel_tables,
    excel_tasks,
    flights_tasks,
    messy_tables,
    retail_tasks,
    sales_tasks,
    sensors_tasks,
    sqlite_tables,
    support_tasks,
    timesheets_tasks,
    transactions_tasks,
    university_tasks,
    workbook_financials,
    workbook_inventory,
    workbook_retail,
    workbook_sales,
)
from analyst_env.datasets.shipped.cache import MANIFEST, cache_root, materialize
from analyst_env.datasets.shipped.draft import leaks, oracle_and_verifier, to_task
from analyst_env.datasets.shipped.workbook_draft import leaks as workbook_leaks
from analyst_env.datasets.shipped.workbook_draft import to_workbook_task
from analyst_env.datasets.shipped.writers import write_csv, write_sqlite, write_xlsx
from analyst_env.task_format import Dataset, Task

NAME = "starter"
GENERATOR_VERSION = 4  # 4: number answers scored to half a unit (numeric decimals)
DEFAULT_SEED = 0
TEST_FRACTION = 0.2


def _read_csv(path: Path) -> pd.DataFrame:
    return pd.read_csv(path)


def _read_sqlite(path: Path) -> dict[str, pd.DataFrame]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        names = [
            r[0]
            for r in con.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")
        ]
        return {n: pd.read_sql_query(f'SELECT * FROM "{n}"', con) for n in names}
    finally:
        con.close()


def _read_xlsx(path: Path) -> dict[str, pd.DataFrame]:
    return pd.read_excel(path, sheet_name=None, engine="openpyxl")


# (file name, kind, table maker, writer, reader, templates, default repetitions per template).
# Append only: a source's position seeds its tables and parameters.
SOURCES: list[
    tuple[str, str, Callable[..., Any], Callable[..., None], Callable[[Path], Any], list, int]
] = [
    ("sales.csv", "csv", csv_tables.make_sales, write_csv, _read_csv, sales_tasks.TEMPLATES, 2),
    (
        "employees.csv",
        "csv",
        csv_tables.make_employees,
        write_csv,
        _read_csv,
        employees_tasks.TEMPLATES,
        1,
    ),
    (
        "flights.csv",
        "csv",
        csv_tables.make_flights,
        write_csv,
        _read_csv,
        flights_tasks.TEMPLATES,
        2,
    ),
    (
        "sensors.csv",
        "csv",
        csv_tables.make_sensors,
        write_csv,
        _read_csv,
        sensors_tasks.TEMPLATES,
        1,
    ),
    (
        "retail.sqlite",
        "sqlite",
        sqlite_tables.make_retail_db,
        write_sqlite,
        _read_sqlite,
        retail_tasks.TEMPLATES,
        4,
    ),
    (
        "university.sqlite",
        "sqlite",
        sqlite_tables.make_university_db,
        write_sqlite,
        _read_sqlite,
        university_tasks.TEMPLATES,
        4,
    ),
    (
        "financials.xlsx",
        "excel",
        excel_tables.make_financials_wb,
        write_xlsx,
        _read_xlsx,
        excel_tasks.TEMPLATES["financials"],
        5,
    ),
    (
        "inventory.xlsx",
        "excel",
        excel_tables.make_inventory_wb,
        write_xlsx,
        _read_xlsx,
        excel_tasks.TEMPLATES["inventory"],
        5,
    ),
    (
        "transactions.csv",
        "csv",
        messy_tables.make_transactions,
        write_csv,
        _read_csv,
        transactions_tasks.TEMPLATES,
        1,
    ),
    (
        "events.csv",
        "csv",
        messy_tables.make_events,
        write_csv,
        _read_csv,
        events_tasks.TEMPLATES,
        1,
    ),
    (
        "support.sqlite",
        "sqlite",
        messy_tables.make_support_db,
        write_sqlite,
        _read_sqlite,
        support_tasks.TEMPLATES,
        1,
    ),
    (
        "budget.xlsx",
        "excel",
        messy_tables.make_budget_wb,
        write_xlsx,
        _read_xlsx,
        budget_tasks.TEMPLATES,
        1,
    ),
    (
        "timesheets.xlsx",
        "excel",
        messy_tables.make_timesheets_wb,
        write_xlsx,
        _read_xlsx,
        timesheets_tasks.TEMPLATES,
        1,
    ),
]

# Result-workbook templates over files of SOURCES: (input file name, templates). Append only, as
# above.
WORKBOOK_SOURCES: list[tuple[str, list]] = [
    ("sales.csv", workbook_sales.TEMPLATES),
    ("retail.sqlite", workbook_retail.TEMPLATES),
    ("financials.xlsx", workbook_financials.TEMPLATES),
    ("inventory.xlsx", workbook_inventory.TEMPLATES),
]
WORKBOOK_STREAM = 2
"""Third element of the seed sequence ``[seed, index, stream]`` that draws result-workbook
parameters."""


def _split_of(task_ids: list[str], seed: int) -> dict[str, str]:
    """Deterministic 80/20 train/test split: the ids with the smallest seeded hashes go to test.

    Question tasks and result-workbook tasks are split separately, so adding
    the workbook tasks moved no question task between train and test.
    """
    ranked = sorted(task_ids, key=lambda i: hashlib.sha256(f"{seed}:{i}".encode()).hexdigest())
    n_test = round(len(ranked) * TEST_FRACTION)
    return {tid: ("test" if k < n_test else "train") for k, tid in enumerate(ranked)}


def _draws(template: Callable[..., Any], default: int) -> tuple[int, int]:
    """(tasks wanted, draws allowed) for a template.

    Templates marked with ``draft.repeat(n)`` get up to ``3 * n`` draws to reach
    ``n`` distinct tasks; the original templates keep exactly ``default`` draws,
    so their parameters, and every id after them, are unchanged.
    """
    n = getattr(template, "reps", None)
    return (default, default) if n is None else (n, 3 * n)


def generate(directory: Path, seed: int = DEFAULT_SEED) -> list[Task]:
    """Write the starter files, reference workbooks and ``manifest.json`` into ``directory``; return
    the tasks.

    Args:
        directory: An existing, empty directory.
        seed: Seed for tables and template parameters.

    Returns:
        The tasks, with ``files`` pointing into ``directory``.
    """
    drafts = []
    inputs: dict[str, tuple[str, Any]] = {}
    for index, (file_name, kind, make, write, read, templates, reps) in enumerate(SOURCES):
        path = directory / file_name
        write(make(np.random.default_rng([seed, index, 0])), path)
        data = read(path)
        inputs[file_name] = (kind, data)
        rng = np.random.default_rng([seed, index, 1])
        seen: set[str] = set()
        count = 0
        for template in templates:
            (wanted, allowed), made = _draws(template, reps), 0
            for _ in range(allowed):
                if made == wanted:
                    break
                draft = template(data, rng)
                if draft is None or draft.question in seen:
                    continue
                seen.add(draft.question)
                stem = file_name.split(".")[0]
                task = to_task(
                    draft,
                    f"{NAME}-{stem}-{count:03d}",
                    file_name,
                    str(path),
                    kind,
                    template.__name__,
                    split="train",
                )
                oracle, _, _ = oracle_and_verifier(draft)
                if leaks(task.instruction, oracle, draft.style):
                    continue
                drafts.append(task)
                made += 1
                count += 1
    books = _workbook_tasks(directory, seed, inputs)
    splits = _split_of([t.id for t in drafts], seed) | _split_of([t.id for t in books], seed)
    tasks = [t.model_copy(update={"split": splits[t.id]}) for t in drafts + books]
    manifest = {
        "name": NAME,
        "generator_version": GENERATOR_VERSION,
        "seed": seed,
        "tasks": [_relative(t, directory) for t in tasks],
    }
    (directory / MANIFEST).write_text(
        json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8"
    )
    return tasks


def _workbook_tasks(directory: Path, seed: int, inputs: dict[str, tuple[str, Any]]) -> list[Task]:
    """The result-workbook tasks over the already written input files; references go under
    ``directory``."""
    tasks = []
    for index, (file_name, templates) in enumerate(WORKBOOK_SOURCES):
        kind, data = inputs[file_name]
        rng = np.random.default_rng([seed, index, WORKBOOK_STREAM])
        stem, seen, count = file_name.split(".")[0], set(), 0
        for template in templates:
            (wanted, allowed), made = _draws(template, 1), 0
            for _ in range(allowed):
                if made == wanted:
                    break
                draft = template(data, rng)
                key = repr(
                    draft
                    and (
                        draft.level,
                        [(s.what, [c.meaning for c in s.columns]) for s in draft.sheets],
                    )
                )
                if draft is None or key in seen:
                    continue
                seen.add(key)
                task = to_workbook_task(
                    draft,
                    f"{NAME}-{stem}-wb-{count:03d}",
                    file_name,
                    str(directory / file_name),
                    kind,
                    template.__name__,
                    directory,
                )
                if workbook_leaks(draft, task.instruction):
                    Path(task.answer["references"][0]["path"]).unlink()
                    continue
                tasks.append(task)
                made += 1
                count += 1
    return tasks


def _relative(task: Task, directory: Path) -> dict[str, Any]:
    """A task as the manifest stores it: file and reference paths relative to the set's folder."""
    record = task.model_dump(mode="json") | {"files": {n: n for n in task.files}}
    if task.verifier.name == "workbook_match":
        for ref in record["answer"]["references"]:
            ref["path"] = str(Path(ref["path"]).relative_to(directory))
    return record


def _load_manifest(directory: Path) -> Dataset:
    manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    tasks = []
    for record in manifest["tasks"]:
        record["files"] = {n: str(directory / rel) for n, rel in record["files"].items()}
        if record["verifier"]["name"] == "workbook_match":
            for ref in record["answer"]["references"]:
                ref["path"] = str(directory / ref["path"])
        tasks.append(Task.model_validate(record))
    return Dataset(name=NAME, tasks=tasks)


def starter_dir(seed: int = DEFAULT_SEED, cache_dir: str | Path | None = None) -> Path:
    """Where the set for ``seed`` is cached (whether or not it exists yet)."""
    root = Path(cache_dir) if cache_dir is not None else cache_root()
    return root / f"{NAME}-v{GENERATOR_VERSION}-seed{seed}"


def load_starter(seed: int = DEFAULT_SEED, cache_dir: str | Path | None = None) -> Dataset:
    """Load the starter set, generating it into the cache first if needed.

    Args:
        seed: Generation seed; each seed is a different, reproducible set.
        cache_dir: Cache root; defaults to ``$ANALYST_ENV_CACHE`` or ``~/.cache/analyst_env``.

    Returns:
        The dataset; task files point into the cache directory.
    """
    final = materialize(starter_dir(seed, cache_dir), lambda tmp: generate(tmp, seed))
    return _load_manifest(final)
