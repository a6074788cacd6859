"""Turn an upstream benchmark clone into the folder a loader reads, and say its license.

Benchmark data cannot ship with this project (several licenses forbid it), so a
user clones the benchmark's own repository and runs ``analyst-env datasets
prepare NAME CLONE``. Each :class:`Source` says where upstream keeps the files a
loader needs (``examples/DA-Agent/data/da-dev-questions.jsonl`` for DABench, ...)
and where the loader expects them. Preparing checks that every required file is
there, links or copies it into the output folder (hard links where the file
system allows, so a 4 GB Spider database costs nothing), converts the one
upstream file that is not already a loader's format (SheetCopilot's
``dataset.xlsx``), keeps only the tasks whose files are present (DA-Code's
repository ships 62 of its 500 task folders), and finally loads the result with
the real loader so a broken folder fails here, not at the first reset.

Where upstream already keeps the files as the loader reads them (DABench's
``examples/DA-Agent/data``, Spider's release folder, KaggleDBQA, TableBench), and
for a folder prepared before (``../shared/datasets/dabench``), the folder is found,
checked and loaded in place and nothing is copied.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analyst_env.datasets.registry import load_dataset


class PrepareError(Exception):
    """A clone that cannot be prepared; the message says what is missing and where."""


@dataclass(frozen=True)
class Source:
    """Where one benchmark's files are upstream and where its loader wants them."""

    name: str
    format: str  # the loader's FORMAT in ``--dataset FORMAT:PATH``
    upstream: str
    license: str
    bases: tuple[str, ...]  # folders inside a clone that may hold the files, tried in order
    required: tuple[str, ...]  # paths under a base, laid out as the loader reads them
    optional: tuple[str, ...] = ()
    renames: dict[str, str] = field(default_factory=dict)  # upstream path -> loader path


SOURCES: dict[str, Source] = {
    s.name: s
    for s in (
        Source(
            "dabench",
            "dabench",
            "https://github.com/InfiAgent/InfiAgent (examples/DA-Agent/data)",
            "CC BY-NC 4.0 (data; code Apache-2.0): non-commercial use only, attribution required",
            ("examples/DA-Agent/data", "data", ""),
            ("da-dev-questions.jsonl", "da-dev-labels.jsonl", "da-dev-tables"),
        ),
        Source(
            "spider",
            "spider",
            "https://yale-lily.github.io/spider (the release archive) or github.com/taoyds/spider",
            "CC BY-SA 4.0: attribution and share-alike",
            ("spider_data", "spider", ""),
            ("dev.json", "database"),
            ("tables.json", "dev_gold.sql"),
        ),
        Source(
            "kaggledbqa",
            "kaggledbqa",
            "https://github.com/chiahsuan156/KaggleDBQA",
            "CC BY-SA 4.0 (per-database licenses in DATASETS.md): attribution and share-alike",
            ("datasets/kaggle-dbqa", "kaggle-dbqa", ""),
            ("examples", "databases"),
            ("KaggleDBQA_tables.json", "LICENSE.md", "DATASETS.md"),
        ),
        Source(
            "dacode",
            "dacode",
            "https://github.com/yiyihum/da-code (folder da_code)",
            "MIT",
            ("da_code", ""),
            ("tasks.jsonl", "eval.jsonl", "source", "gold"),
            renames={
                "configs/task/all.jsonl": "tasks.jsonl",
                "configs/eval/eval_all.jsonl": "eval.jsonl",
            },
        ),
        Source(
            "sheetcopilot",
            "sheetcopilot",
            "https://github.com/BraveGroup/SheetCopilot (folder dataset)",
            "GPL-3.0: keep the license notice; derived data is share-alike",
            ("dataset", ""),
            ("tasks.jsonl", "task_sheets", "task_sheet_answers_v2"),
            renames={"dataset.xlsx": "tasks.jsonl"},
        ),
        Source(
            "tablebench",
            "tablebench",
            "https://github.com/TableBench/TableBench (its TableBench*.jsonl records)",
            "Apache-2.0 (data), MIT (code)",
            ("", "data"),
            ("*.jsonl",),
        ),
    )
}


def _present(base: Path, rel: str) -> bool:
    return any(base.glob(rel)) if "*" in rel else (base / rel).exists()


def _find_base(source: Source, clone: Path) -> tuple[Path, bool]:
    """The folder holding the files, and whether it is already in the loader's layout."""
    for rel in source.bases:
        base = clone / rel
        if all(_present(base, r) for r in source.required):
            return base, True
    for rel in source.bases:
        base = clone / rel
        wanted = [
            next((u for u, v in source.renames.items() if v == r), r) for r in source.required
        ]
        if all(_present(base, w) for w in wanted):
            return base, False
    tried = ", ".join(str(clone / b) if b else str(clone) for b in source.bases)
    upstream_names = [
        next((u for u, v in source.renames.items() if v == r), r) for r in source.required
    ]
    raise PrepareError(
        f"{source.name}: no folder under {clone} holds {', '.join(upstream_names)} "
        f"(looked in {tried}); clone {source.upstream}"
    )


def _link_tree(src: Path, dst: Path) -> None:
    """Copy ``src`` to ``dst``, hard-linking files where the file system allows."""

    def link_or_copy(a: str, b: str) -> None:
        if os.path.exists(b):
            return  # taken already (several tasks share one input workbook)
        try:
            os.link(a, b)
        except OSError:
            shutil.copy2(a, b)

    if src.is_dir():
        shutil.copytree(src, dst, copy_function=link_or_copy, dirs_exist_ok=True)
    else:
        dst.parent.mkdir(parents=True, exist_ok=True)
        link_or_copy(str(src), str(dst))


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def _sheetcopilot_rows(xlsx: Path) -> list[dict[str, Any]]:
    """``dataset.xlsx`` rows as the dicts ``tasks.jsonl`` holds (header -> value)."""
    from openpyxl import load_workbook

    ws = load_workbook(xlsx, read_only=True, data_only=True).worksheets[0]
    rows = ws.iter_rows(values_only=True)
    header = [str(h) for h in next(rows)]
    return [dict(zip(header, r, strict=False)) for r in rows if any(v is not None for v in r)]


def _dacode_usable(base: Path, tid: str, ev: dict[str, Any] | None) -> bool:
    """Whether the clone has everything the loader needs for task ``tid``."""
    from analyst_env.datasets.dacode import SUPPORTED

    if ev is None or not (base / "source" / tid).is_dir():
        return False
    funcs = ev.get("func") or []
    if len(funcs) != 1 or funcs[0] not in SUPPORTED:
        return False  # machine learning and plotting tasks have no scorer here
    if funcs[0] != "compare_csv":
        return True
    result = (ev.get("result") or [{}])[0]
    names = result.get("file") or []
    names = names if isinstance(names, list) else [names]
    return bool(names) and all((base / "gold" / tid / n).is_file() for n in names)


def _copy_dacode(base: Path, out: Path) -> int:
    """Tasks the clone has every file of and a scorer exists for; returns how many were left out."""
    evals = {e["id"]: e for e in _read_jsonl(base / "configs/eval/eval_all.jsonl")}
    kept, dropped = [], 0
    for row in _read_jsonl(base / "configs/task/all.jsonl"):
        tid = row["id"]
        if not _dacode_usable(base, tid, evals.get(tid)):
            dropped += 1
            continue
        kept.append(row)
        _link_tree(base / "source" / tid, out / "source" / tid)
        if (base / "gold" / tid).is_dir():
            _link_tree(base / "gold" / tid, out / "gold" / tid)
    _write_jsonl(out / "tasks.jsonl", kept)
    _write_jsonl(out / "eval.jsonl", [evals[r["id"]] for r in kept])
    return dropped


_REFERENCE_FILE = re.compile(r"^\d+_.+_gt\d+(_check\.yaml|\.xlsx)$")


def _copy_sheetcopilot(base: Path, out: Path) -> int:
    """Rows whose workbook and checked references exist; returns how many were left out.

    Upstream reference folders also hold editor lock files (``~$...``) and stray
    copies (``..._gt1 - 副本.xlsx``): only ``<No>_<Sheet>_gt<N>.xlsx`` files with their
    ``_check.yaml`` are taken.
    """
    kept, dropped = [], 0
    for row in _sheetcopilot_rows(base / "dataset.xlsx"):
        sheet, no = row.get("Sheet Name"), row.get("No.")
        refs = base / "task_sheet_answers_v2" / str(sheet) / f"{no}_{sheet}"
        workbook = base / "task_sheets" / f"{sheet}.xlsx"
        files = sorted(p for p in refs.glob("*") if _REFERENCE_FILE.match(p.name))
        checked = [
            p
            for p in files
            if p.suffix == ".xlsx" and p.with_name(p.stem + "_check.yaml").is_file()
        ]
        if not (sheet and no is not None and workbook.is_file() and checked):
            dropped += 1
            continue
        kept.append(row)
        for path in checked:
            for part in (path, path.with_name(path.stem + "_check.yaml")):
                _link_tree(part, out / "task_sheet_answers_v2" / str(sheet) / refs.name / part.name)
        _link_tree(workbook, out / "task_sheets" / workbook.name)
    _write_jsonl(out / "tasks.jsonl", kept)
    return dropped


def _copy_as_is(source: Source, base: Path, out: Path) -> int:
    for rel in (*source.required, *source.optional):
        for path in sorted(base.glob(rel)) if "*" in rel else [base / rel]:
            if path.exists():
                _link_tree(path, out / path.relative_to(base))
    return 0


@dataclass
class Prepared:
    """What ``prepare`` made: the ``--dataset`` spec to use and what the loader read."""

    source: Source
    path: Path
    copied: bool
    tasks: int
    left_out: int  # upstream tasks whose files are absent from the clone
    quarantined: int  # loaded but never served (``validate --dataset SPEC`` says why)

    @property
    def spec(self) -> str:
        return f"{self.source.format}:{self.path}"


def prepare(
    name: str, clone: str | os.PathLike[str], out: str | os.PathLike[str] | None
) -> Prepared:
    """Check (and, from an upstream clone, build) the loader's folder for benchmark ``name``.

    Args:
        name: A key of :data:`SOURCES`.
        clone: An upstream clone, or a folder already in the loader's layout.
        out: Where to build the folder from an upstream clone (must not exist or be empty);
            ignored when ``clone`` is already in the loader's layout.

    Raises:
        PrepareError: With one line naming what is missing.
    """
    if name not in SOURCES:
        raise PrepareError(f"unknown benchmark {name!r}; known: {', '.join(sorted(SOURCES))}")
    source = SOURCES[name]
    clone_path = Path(clone).expanduser().resolve()
    if not clone_path.is_dir():
        raise PrepareError(f"{clone_path}: no such folder (clone {source.upstream} first)")
    base, ready = _find_base(source, clone_path)
    left_out = 0
    if ready:
        target = base
    else:
        target = Path(out if out is not None else name).expanduser().resolve()
        if target.exists() and any(target.iterdir()):
            raise PrepareError(f"{target} exists and is not empty; pass --out to an empty folder")
        target.mkdir(parents=True, exist_ok=True)
        copier = {"dacode": _copy_dacode, "sheetcopilot": _copy_sheetcopilot}.get(name)
        left_out = copier(base, target) if copier else _copy_as_is(source, base, target)
    try:
        dataset = load_dataset(f"{source.format}:{target}")
    except (OSError, ValueError, KeyError) as exc:
        raise PrepareError(f"{name}: the prepared folder {target} does not load: {exc}") from None
    quarantined = sum(t.quarantine_reason is not None for t in dataset.tasks)
    return Prepared(source, target, not ready, len(dataset.tasks), left_out, quarantined)
