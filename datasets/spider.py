"""Loader for Spider 1.0 (Yu et al., 2018): text-to-SQL questions over SQLite databases.

Spider is CC BY-SA 4.0 and never ships with this project: point the loader at a
folder laid out like the official release (``dev.json``, optionally
``dev_gold.sql``, and ``database/<db_id>/<db_id>.sqlite``). Each record becomes
one task, id ``spider-<split>-NNNN`` from its position in the file, scored by
execution accuracy as test-suite-sql-eval computes it on the one database
(the ``sql_execution`` verifier). The agent answers with one SQLite query or
with the result values; see :mod:`analyst_env.datasets.sql_benchmarks` for the
exact answer format.

The gold query is the line of ``<split>_gold.sql`` (the file the official
evaluator reads) when that file is present, else the record's ``query``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from analyst_env.datasets.sql_benchmarks import sql_task
from analyst_env.task_format import Dataset


def _read_gold_file(path: Path, records: list[dict[str, Any]]) -> list[str]:
    """Gold queries from ``<split>_gold.sql`` (``<sql>\\t<db_id>`` a line), checked against
    records."""
    lines = [
        line.rstrip("\n") for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    if len(lines) != len(records):
        raise ValueError(
            f"{path} has {len(lines)} queries but the question file has {len(records)} records"
        )
    golds = []
    for n, (line, rec) in enumerate(zip(lines, records, strict=True)):
        sql, sep, db_id = line.rpartition("\t")
        if not sep or db_id.strip() != rec["db_id"]:
            raise ValueError(
                f"{path} line {n + 1}: expected '<sql>\\t{rec['db_id']}', got {line[:80]!r}"
            )
        golds.append(sql.strip())
    return golds


def load_spider(root: str | os.PathLike[str], split: str = "dev") -> Dataset:
    """Load one Spider split as tasks.

    Args:
        root: Folder with ``<split>.json`` and ``database/``.
        split: The question file's stem (``dev``; ``train_spider`` in the full release).

    Returns:
        A dataset named ``spider`` with one task per record, in file order.

    Raises:
        FileNotFoundError: If the question file is missing.
        ValueError: If a record lacks a field or the gold file does not line up with the records.
    """
    root = Path(root).resolve()
    questions = root / f"{split}.json"
    if not questions.is_file():
        raise FileNotFoundError(
            f"Spider question file {questions} not found (expected <root>/{split}.json)"
        )
    records = json.loads(questions.read_text(encoding="utf-8"))
    if not isinstance(records, list):
        raise ValueError(f"{questions} must hold a JSON list of records")
    for n, rec in enumerate(records):
        missing = [k for k in ("db_id", "question", "query") if not isinstance(rec.get(k), str)]
        if missing:
            raise ValueError(f"{questions} record {n} lacks {', '.join(missing)}")
    gold_file = root / f"{split}_gold.sql"
    golds = (
        _read_gold_file(gold_file, records)
        if gold_file.is_file()
        else [r["query"] for r in records]
    )
    width = max(4, len(str(len(records) - 1)))
    tasks = [
        sql_task(
            task_id=f"spider-{split}-{n:0{width}d}",
            question=rec["question"],
            gold_sql=gold,
            db_id=rec["db_id"],
            db_path=root / "database" / rec["db_id"] / f"{rec['db_id']}.sqlite",
            split=split,
            source="spider",
            parsed_sql=rec.get("sql"),
        )
        for n, (rec, gold) in enumerate(zip(records, golds, strict=True))
    ]
    return Dataset(name="spider", tasks=tasks)
