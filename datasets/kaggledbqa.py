"""Loader for KaggleDBQA (Lee et al., ACL 2021): text-to-SQL over real Kaggle SQLite databases.

KaggleDBQA is CC BY-SA 4.0 and never ships with this project: point the loader
at a folder laid out like upstream's release (``examples/<db>_<split>.json``,
``databases/<db>/<db>.sqlite``, optionally ``KaggleDBQA_tables.json``). Each
record becomes one task, id ``kaggledbqa-<db>-<split>-NNN`` from its position in
its file, in the split the file name gives (``fewshot`` or ``test``); the
combined ``examples/<db>.json`` files repeat those records and are skipped.
Records are in Spider format and are scored like Spider, by execution accuracy
(the ``sql_execution`` verifier); the answer format is in
:mod:`analyst_env.datasets.sql_benchmarks`.

Upstream means the database documentation in ``KaggleDBQA_tables.json``
(overview, column descriptions, value codes) to be available to the system, so
when that file is present the instruction includes it.

Example:
    >>> print(database_notes({"db_overview": "Crimes.", "table_names_original": ["crime"],
    ...     "column_names_original": [[-1, "*"], [0, "Type"]],
    ...     "column_descriptions": ["*", "kind of crime"],
    ...     "value_enums": {"Type": {"B": "burglary"}}}))
    About the database: Crimes.
    Columns:
    - crime.Type: kind of crime
    Value codes:
    - Type: B = burglary
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from analyst_env.datasets.sql_benchmarks import sql_task
from analyst_env.task_format import Dataset, Task

EXAMPLES = "examples"
DATABASES = "databases"
TABLES = "KaggleDBQA_tables.json"


def database_notes(entry: dict[str, Any]) -> str:
    """The documentation of one database from ``KaggleDBQA_tables.json``, as instruction text."""
    lines = []
    if str(entry.get("db_overview") or "").strip():
        lines.append(f"About the database: {entry['db_overview'].strip()}")
    tables = entry.get("table_names_original") or []
    columns = [
        f"- {tables[t]}.{name}: {desc.strip()}"
        for (t, name), desc in zip(
            entry.get("column_names_original") or [], entry.get("column_descriptions") or []
        )
        if 0 <= t < len(tables) and str(desc).strip()
    ]
    if columns:
        lines += ["Columns:", *columns]
    enums = entry.get("value_enums")
    if isinstance(enums, dict) and enums:
        lines.append("Value codes:")
        for column, codes in enums.items():
            if isinstance(codes, dict):
                lines.append(f"- {column}: " + "; ".join(f"{k} = {v}" for k, v in codes.items()))
    return "\n".join(lines)


def _notes_by_db(root: Path) -> dict[str, str]:
    path = root / TABLES
    if not path.is_file():
        return {}
    entries = json.loads(path.read_text(encoding="utf-8"))
    return {e["db_id"]: database_notes(e) for e in entries if isinstance(e, dict) and "db_id" in e}


def _file_split(path: Path, records: list[dict[str, Any]]) -> tuple[str, str] | None:
    """(db_id, split) of an examples file, or None for a combined ``<db>.json`` file."""
    db_ids = {r.get("db_id") for r in records}
    db_id = next(iter(db_ids)) if len(db_ids) == 1 else None
    if not isinstance(db_id, str):
        raise ValueError(
            f"{path}: expected records of one database, found db_ids {sorted(map(str, db_ids))}"
        )
    if path.stem == db_id:
        return None
    if not path.stem.startswith(db_id + "_") or len(path.stem) == len(db_id) + 1:
        raise ValueError(f"{path}: file name should be {db_id}_<split>.json for records of {db_id}")
    return db_id, path.stem[len(db_id) + 1 :]


def load_kaggledbqa(root: str | os.PathLike[str], splits: list[str] | None = None) -> Dataset:
    """Load KaggleDBQA examples as tasks.

    Args:
        root: Folder with ``examples/`` and ``databases/``.
        splits: Only these splits (file-name suffixes such as ``fewshot``, ``test``); default all.

    Returns:
        A dataset named ``kaggledbqa``: tasks ordered by file name, then record position.

    Raises:
        FileNotFoundError: If ``examples/`` is missing or holds no split files.
        ValueError: If a file mixes databases, is misnamed, or a record lacks a field.
    """
    root = Path(root).resolve()
    examples = root / EXAMPLES
    if not examples.is_dir():
        raise FileNotFoundError(f"KaggleDBQA examples folder {examples} not found")
    notes = _notes_by_db(root)
    tasks: list[Task] = []
    for path in sorted(examples.glob("*.json")):
        records = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(records, list):
            raise ValueError(f"{path} must hold a JSON list of records")
        if not records:
            continue
        for n, rec in enumerate(records):
            missing = [k for k in ("db_id", "question", "query") if not isinstance(rec.get(k), str)]
            if missing:
                raise ValueError(f"{path} record {n} lacks {', '.join(missing)}")
        found = _file_split(path, records)
        if found is None or (splits is not None and found[1] not in splits):
            continue
        db_id, split = found
        width = max(3, len(str(len(records) - 1)))
        tasks += [
            sql_task(
                task_id=f"kaggledbqa-{db_id}-{split}-{n:0{width}d}",
                question=rec["question"],
                gold_sql=rec["query"],
                db_id=db_id,
                db_path=root / DATABASES / db_id / f"{db_id}.sqlite",
                split=split,
                source="kaggledbqa",
                parsed_sql=rec.get("sql"),
                notes=notes.get(db_id, ""),
            )
            for n, rec in enumerate(records)
        ]
    if not tasks:
        raise FileNotFoundError(f"no <db>_<split>.json example files with records in {examples}")
    return Dataset(name="kaggledbqa", tasks=tasks)
