"""Loader for InfiAgent-DABench closed-form questions (CSV input, ``@name[value]`` answers).

The benchmark data is CC BY-NC 4.0 and never ships with this project: the
loader reads it from a directory laid out like upstream's
``examples/DA-Agent/data`` (``da-dev-questions.jsonl``, ``da-dev-labels.jsonl``
and ``da-dev-tables/``). Scoring uses the official rule (the ``dabench``
verifier).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from analyst_env.datasets.gold_audit import contradicting_labels
from analyst_env.task_format import Dataset, Task, VerifierSpec

QUESTIONS = "da-dev-questions.jsonl"
LABELS = "da-dev-labels.jsonl"
TABLES = "da-dev-tables"


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def build_instruction(q: dict[str, Any]) -> str:
    """The agent-facing instruction for one DABench question record.

    Example:
        >>> print(build_instruction({"question": "Mean fare?", "constraints": "Round to 2 dp.",
        ...     "format": "@mean_fare[value]", "file_name": "t.csv"}).splitlines()[0])
        Mean fare?
    """
    parts = [q["question"].strip()]
    if q.get("constraints"):
        parts.append("Constraints:\n" + q["constraints"].strip())
    parts.append(f"The data is in the CSV file `{q['file_name']}` in your working directory.")
    parts.append(
        "Answer format: your final answer must contain each part written as "
        "@answer_name[value], exactly as follows:\n" + q["format"].strip()
    )
    return "\n\n".join(parts)


def load_dabench(root: str | os.PathLike[str], split: str = "dev") -> Dataset:
    """Load DABench questions and labels as tasks.

    Args:
        root: Directory with the question/label JSONL files and the tables folder.
        split: Split name given to every task.

    Returns:
        A dataset named ``dabench`` with one task per question that has a label.

    Raises:
        FileNotFoundError: If the question or label file is missing.
    """
    root = Path(root).resolve()
    questions = _read_jsonl(root / QUESTIONS)
    labels = {rec["id"]: rec["common_answers"] for rec in _read_jsonl(root / LABELS)}
    tasks = []
    for q in questions:
        if q["id"] not in labels:
            continue
        answer = [[str(n), str(v)] for n, v in labels[q["id"]]]
        contradictions = contradicting_labels(answer)
        tasks.append(
            Task(
                id=f"dabench-{q['id']}",
                instruction=build_instruction(q),
                files={q["file_name"]: str(root / TABLES / q["file_name"])},
                answer=answer,
                oracle_answer=" ".join(f"@{n}[{v}]" for n, v in answer),
                verifier=VerifierSpec(name="dabench"),
                split=split,
                metadata={
                    "source": "dabench",
                    "level": q.get("level"),
                    "concepts": list(q.get("concepts", [])),
                    "kind": "csv",
                    "gold_status": (
                        f"label contradicts itself: {'; '.join(contradictions)}"
                        if contradictions
                        else "ok"
                    ),
                },
            )
        )
    return Dataset(name="dabench", tasks=tasks)
