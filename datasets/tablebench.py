"""Loader for TableBench questions, each inline table written out as a CSV file for the agent.

The data is Apache-2.0 and never ships with this project: the loader reads
JSONL files whose lines are TableBench records (``id``, ``qtype``, ``qsubtype``,
``table`` as ``{"columns": [...], "data": [[...]]}`` JSON or Python literal,
``question``, ``answer``), such as the shared ``TableBench_DP_examples.jsonl``.
The table is materialized once per record under the cache directory
(``$ANALYST_ENV_CACHE``, default ``~/.cache/analyst_env``) as ``table.csv``.
Scoring is the ``tablebench`` verifier with the metric upstream uses for the
question type. Records whose table cannot be parsed are kept with
``metadata["gold_status"]`` saying so (their table file is empty).
"""

from __future__ import annotations

import ast
import csv
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from analyst_env.task_format import Dataset, Task, VerifierSpec
from analyst_env.verifiers.tablebench import metric_for, parse_series

TABLE_NAME = "table.csv"


def parse_table(raw: Any) -> tuple[list[str], list[list[Any]]]:
    """Columns and rows of a TableBench ``table`` field (dict, JSON or Python literal text).

    Raises:
        ValueError: If it is not a mapping with ``columns`` and ``data`` lists.

    Example:
        >>> parse_table("{'columns': ['a', 'b'], 'data': [[1, 'x']]}")
        (['a', 'b'], [[1, 'x']])
    """
    value = raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            try:
                value = ast.literal_eval(raw)
            except (ValueError, SyntaxError) as exc:
                raise ValueError(f"table is neither JSON nor a Python literal: {exc}") from None
    if (
        not isinstance(value, dict)
        or not isinstance(value.get("columns"), list)
        or not isinstance(value.get("data"), list)
    ):
        raise ValueError("table must be a mapping with 'columns' and 'data' lists")
    return [str(c) for c in value["columns"]], [list(r) for r in value["data"]]


def build_instruction(record: dict[str, Any], qtype: str) -> str:
    """The agent-facing instruction for one record.

    Example:
        >>> "Final Answer" in build_instruction({"question": "How many?"}, "NumericalReasoning")
        True
    """
    parts = [
        f"The table is in the CSV file `{TABLE_NAME}` in your working directory "
        "(the header row holds the original column names, which may repeat).",
        "Question: " + str(record["question"]).strip(),
    ]
    if qtype == "Visualization":
        parts.append(
            "Draw the chart with matplotlib, then answer with the plotted y values as "
            "`Final Answer: y_references = [[...], ...]` (one list per series, in plotting order)."
        )
    else:
        parts.append(
            "Answer with final_answer as `Final Answer: AnswerName1, AnswerName2...`: as few "
            "words or numbers as possible, comma-separated when there are several."
        )
    return "\n\n".join(parts)


def _cache_dir(cache_dir: str | os.PathLike[str] | None) -> Path:
    base = (
        cache_dir or os.environ.get("ANALYST_ENV_CACHE") or Path.home() / ".cache" / "analyst_env"
    )
    return Path(base) / "tablebench"


def _write_table(folder: Path, columns: list[str], rows: list[list[Any]]) -> Path:
    path = folder / TABLE_NAME
    if path.is_file():
        return path
    folder.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    with open(tmp, "w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        if columns:
            writer.writerow(columns)
        writer.writerows(rows)
    os.replace(tmp, path)
    return path


def load_tablebench(
    root: str | os.PathLike[str],
    split: str = "test",
    cache_dir: str | os.PathLike[str] | None = None,
) -> Dataset:
    """Load TableBench records from every ``*.jsonl`` file in ``root`` (or ``root`` itself if a
    file).

    Args:
        root: A JSONL file or a folder of them.
        split: Split name given to every task.
        cache_dir: Where table CSVs are written (default ``$ANALYST_ENV_CACHE``).

    Returns:
        A dataset named ``tablebench``.

    Raises:
        FileNotFoundError: If there is no JSONL file.
        ValueError: If a record lacks ``id``, ``qtype``, ``question`` or ``answer``,
            or an id repeats.
    """
    root = Path(root).resolve()
    files = [root] if root.is_file() else sorted(root.glob("*.jsonl")) if root.is_dir() else []
    if not files:
        raise FileNotFoundError(f"no TableBench *.jsonl file at {root}")
    cache = _cache_dir(cache_dir)
    tasks, seen = [], set()
    for path in files:
        with open(path, encoding="utf-8") as fh:
            records = [json.loads(line) for line in fh if line.strip()]
        for rec in records:
            missing = [k for k in ("id", "qtype", "question", "answer") if k not in rec]
            if missing:
                raise ValueError(f"{path}: record {rec.get('id')!r} lacks {missing}")
            if rec["id"] in seen:
                raise ValueError(f"{path}: TableBench id {rec['id']!r} repeats")
            seen.add(rec["id"])
            qtype, qsub = str(rec["qtype"]), str(rec.get("qsubtype", ""))
            metric = metric_for(qtype, qsub)
            status = "ok"
            try:
                columns, rows = parse_table(rec.get("table"))
            except ValueError as exc:
                columns, rows, status = [], [], f"table unreadable: {exc}"
            if metric == "Pass@1" and parse_series(str(rec["answer"])) is None:
                status = "answer has no y_references series"
            digest = hashlib.sha256(json.dumps([columns, rows], default=str).encode()).hexdigest()[
                :16
            ]
            table = _write_table(cache / f"{rec['id']}-{digest}", columns, rows)
            answer = str(rec["answer"])
            tasks.append(
                Task(
                    id=f"tablebench-{rec['id']}",
                    instruction=build_instruction(rec, qtype),
                    files={TABLE_NAME: str(table)},
                    answer={"answer": answer, "metric": metric},
                    oracle_answer=f"Final Answer: {answer}",
                    verifier=VerifierSpec(name="tablebench"),
                    split=split,
                    metadata={
                        "source": "tablebench",
                        "kind": "csv",
                        "qtype": qtype,
                        "qsubtype": qsub,
                        "metric": metric,
                        "gold_status": status,
                    },
                )
            )
    return Dataset(name="tablebench", tasks=tasks)
