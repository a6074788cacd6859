"""Where an evaluation run lives, and its JSONL log that makes an interrupted run resumable.

A run is a directory ``<state_dir>/runs/<run_id>/`` (``analyst-env eval
--runs-dir`` moves it) holding:

- ``log.jsonl``: a ``{"type": "run", ...}`` header with the run's settings, then
  one ``{"type": "episode", ...}`` line per finished episode, appended and
  flushed the moment it finishes;
- ``report.json`` and ``report.html``: written when the run ends.

The run id is derived from the settings that change results (dataset, split,
limit, policy or model and endpoint, sampling, samples, turn and token limits),
so running the same command again resumes the run: episodes already in the log
are not played again, except those that failed for a transient reason (the
model endpoint or the environment server was down), which are retried. A server
whose ``state_dir`` is the same lists the run on its /web Runs page.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

RUNS_DIR = "runs"
LOG_NAME = "log.jsonl"
REPORT_JSON = "report.json"
REPORT_HTML = "report.html"
RUN_ID = re.compile(r"^[A-Za-z0-9_.-]{1,120}$")

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class RunMismatch(ValueError):
    """A log exists for this run id, but was written with other settings."""


def runs_dir(state_dir: str | Path) -> Path:
    """Where the eval runs of ``state_dir`` live (read by the server's Runs page)."""
    return Path(state_dir).expanduser() / RUNS_DIR


def slug(text: str, limit: int = 40) -> str:
    """``text`` made safe for a file name.

    >>> slug("dabench:/data/da bench"), slug("Qwen/Qwen3-8B")
    ('dabench_data_da_bench', 'Qwen_Qwen3-8B')
    """
    return _UNSAFE.sub("_", text).strip("_.")[:limit] or "run"


def run_id_for(config: dict[str, Any]) -> str:
    """``<dataset>-<policy or model>-<hash of the settings>``: the same settings, the same run."""
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:10]
    who = config.get("model") or config.get("policy") or "policy"
    return f"{slug(str(config.get('dataset')), 30)}-{slug(str(who), 30)}-{digest}"


def episode_id_for(run_id: str, task_id: str, sample: int) -> str:
    """The episode id of one sample: unique per run, short enough for trajectory file names."""
    run = hashlib.sha256(run_id.encode()).hexdigest()[:8]
    task = hashlib.sha256(f"{run_id}\0{task_id}".encode()).hexdigest()[:12]
    return f"eval-{run}-{task}-s{sample}"


class RunLog:
    """The ``log.jsonl`` of one run: its header and the episodes finished so far.

    Args:
        path: The log file.
        header: The run's header; its ``config`` must match an existing log's.
        fresh: Discard an existing log instead of resuming it.

    Raises:
        RunMismatch: The existing log was written with another ``config``.
    """

    def __init__(self, path: Path, header: dict[str, Any], *, fresh: bool = False) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        existing = read_log(path) if path.exists() and not fresh else None
        if existing is not None and existing[0].get("config") != header.get("config"):
            raise RunMismatch(
                f"{path} was written with other settings ({existing[0].get('config')}); "
                "pass --fresh to start it over or --run-name to keep both"
            )
        self.previous: list[dict[str, Any]] = existing[1] if existing else []
        self.header = existing[0] if existing else {"type": "run", **header}
        if existing is None:
            path.write_text(json.dumps(self.header, default=str) + "\n", encoding="utf-8")
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 (held for the run)

    def finished(self) -> dict[tuple[str, int], dict[str, Any]]:
        """Episodes not to play again: the newest row per (task, sample), unless transient."""
        done: dict[tuple[str, int], dict[str, Any]] = {}
        for row in self.previous:
            key = (row["task_id"], int(row.get("sample", 0)))
            if row.get("transient"):
                done.pop(key, None)
            else:
                done[key] = row
        return done

    def append(self, row: dict[str, Any]) -> None:
        """Write one finished episode and flush it to disk."""
        self._file.write(json.dumps({"type": "episode", **row}, default=str) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def read_log(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    """The header and episode rows of a log; None without a header.

    Lines that are not JSON (a torn last line) or not a usable episode row are skipped.
    """
    header = None
    rows = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(record, dict):
                continue
            if record.get("type") == "run" and header is None:
                header = record
            elif record.get("type") == "episode" and _is_row(record):
                record.pop("type")
                rows.append(record)
    return (header, rows) if header is not None else None


def _is_row(record: dict[str, Any]) -> bool:
    """An episode line the reports can use: a task id, a numeric reward, an integer sample."""
    reward, sample = record.get("reward"), record.get("sample", 0)
    return (
        isinstance(record.get("task_id"), str)
        and isinstance(reward, int | float)
        and not isinstance(reward, bool)
        and isinstance(sample, int)
    )


def latest_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The newest row of each (task, sample), in first-seen order (a resumed run logs retries)."""
    newest: dict[tuple[str, int], dict[str, Any]] = {}
    for row in rows:
        newest[(row["task_id"], int(row.get("sample", 0)))] = row
    return list(newest.values())
