"""Loader for DA-Code tasks whose outputs are CSV files or a JSON answer (no ML, no plots).

The data is MIT-licensed but large and never ships with this project: the loader
reads a folder laid out like the shared subset (``tasks.jsonl`` and
``eval.jsonl`` lines from upstream, ``source/<id>/`` with the task's working
directory, ``gold/<id>/`` with the expected output files). ``compare_csv`` tasks
are scored by ``dacode_csv`` on the files the agent writes; ``compare_text``
tasks by ``dacode_text`` on the JSON in the answer. A task needing another
upstream metric (ML scores, plots) is a load error naming it, not a silent skip.

Known gold quirks are kept and marked in ``metadata["gold_status"]``: a gold
JSON key that the instruction spells differently (``di-text-002``'s
``"Agriculytural Land %"``) makes the task unsolvable by an agent that follows
the instruction, as upstream.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from analyst_env.datasets.gold_audit import contradicting_labels
from analyst_env.task_format import Dataset, Task, ToolCall, VerifierSpec

TASKS, EVAL, SOURCE, GOLD = "tasks.jsonl", "eval.jsonl", "source", "gold"
SUPPORTED = ("compare_csv", "compare_text")


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: not a DA-Code folder")
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _instruction_keys(instruction: str) -> set[str]:
    return {k.lower().strip() for k in re.findall(r'"([^"\n]+)"\s*:', instruction)}


def write_files_code(files: dict[str, str]) -> str:
    """Python that writes text files into the working directory (the oracle's step).

    Example:
        >>> "open('r.csv', 'w', encoding='utf-8')" in write_files_code({"r.csv": "a\\n1\\n"})
        True
    """
    lines = []
    for name, text in files.items():
        lines.append(f"with open({name!r}, 'w', encoding='utf-8') as fh:\n    fh.write({text!r})")
    lines.append(f"print('wrote', {sorted(files)!r})")
    return "\n".join(lines)


def load_dacode(root: str | os.PathLike[str], split: str = "test") -> Dataset:
    """Load DA-Code tasks scored by ``compare_csv`` or ``compare_text``.

    Args:
        root: Folder with ``tasks.jsonl``, ``eval.jsonl``, ``source/`` and ``gold/``.
        split: Split name given to every task.

    Returns:
        A dataset named ``dacode``.

    Raises:
        FileNotFoundError: If a listing, a task's source folder or a gold file is missing.
        ValueError: If a task has no eval entry or uses an unsupported metric.
    """
    root = Path(root).resolve()
    tasks_rows = _read_jsonl(root / TASKS)
    evals = {e["id"]: e for e in _read_jsonl(root / EVAL)}
    tasks = []
    for row in tasks_rows:
        tid = row["id"]
        if tid not in evals:
            raise ValueError(f"DA-Code task {tid!r} has no line in {EVAL}")
        ev = evals[tid]
        funcs = ev.get("func") or []
        if len(funcs) != 1 or funcs[0] not in SUPPORTED:
            raise ValueError(
                f"DA-Code task {tid!r} uses {funcs}; supported: {', '.join(SUPPORTED)}"
            )
        src = root / SOURCE / tid
        if not src.is_dir():
            raise FileNotFoundError(f"source folder {src} not found")
        files = {p.name: str(p) for p in sorted(src.iterdir()) if p.is_file()}
        result, options = ev["result"][0], (ev.get("options") or [{}])[0]
        status = "ok"
        instruction = row["instruction"].strip()
        if funcs[0] == "compare_csv":
            names = result["file"] if isinstance(result["file"], list) else [result["file"]]
            gold_paths = {n: root / GOLD / tid / n for n in names}
            for p in gold_paths.values():
                if not p.is_file():
                    raise FileNotFoundError(f"gold file {p} not found")
            answer: Any = {
                "outputs": [
                    {"file": n, "gold": [str(p)], "options": options} for n, p in gold_paths.items()
                ]
            }
            verifier = VerifierSpec(name="dacode_csv")
            steps = [
                ToolCall(
                    tool="add_and_execute_code_cell",
                    arguments={
                        "code": write_files_code(
                            {n: p.read_text(encoding="utf-8") for n, p in gold_paths.items()}
                        )
                    },
                )
            ]
            oracle_answer = "done"
            instruction += (
                "\n\nWrite the output file(s) in your working directory, then call "
                "final_answer (the text is not scored)."
            )
        else:
            golds = (
                result["number"] if isinstance(result.get("number"), list) else [result["number"]]
            )
            answer = golds if len(golds) > 1 else golds[0]
            verifier = VerifierSpec(
                name="dacode_text",
                params={
                    "ignore_order": bool(options.get("ignore_order", False)),
                    "score_rule": options.get("score_rule", "all"),
                },
            )
            steps, oracle_answer = [], json.dumps(golds[0])
            missing = sorted({k.lower().strip() for k in golds[0]} - _instruction_keys(instruction))
            if missing:
                status = f"gold keys not named in the instruction: {missing} (scored as upstream)"
            contradictions = [
                c
                for g in golds
                for c in contradicting_labels(
                    (str(k).lower().strip(), json.dumps(v, sort_keys=True)) for k, v in g.items()
                )
            ]
            if contradictions:  # the scorer reads keys case- and space-insensitively
                status = f"label contradicts itself: {'; '.join(contradictions)}"
            instruction += "\n\nAnswer with final_answer, giving the filled-in JSON object."
        tasks.append(
            Task(
                id=f"dacode-{tid}",
                instruction=instruction,
                files=files,
                answer=answer,
                oracle_answer=oracle_answer,
                oracle_steps=steps,
                verifier=verifier,
                split=split,
                metadata={
                    "source": "dacode",
                    "kind": "csv",
                    "type": row.get("type"),
                    "hardness": row.get("hardness"),
                    "metric": funcs[0],
                    "gold_status": status,
                },
            )
        )
    return Dataset(name="dacode", tasks=tasks)
