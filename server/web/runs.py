"""The /web Runs page's JSON routes: eval runs listed, opened and compared task by task.

``analyst-env eval`` keeps each run in ``<state_dir>/runs/<run_id>/`` (see
``run_records/run_log.py``); a server with the same ``state_dir`` lists them here.
Reports are rebuilt from each run's ``log.jsonl`` (the one source of truth, so
a run still in progress or interrupted shows what it has) with the same
function the CLI uses. Each episode row is linked to its recording in the
trajectory store when the server recorded it, so the page can open the replay.

Run ids come from the listing and are checked against a strict pattern and
the runs directory, so a request can never read anything outside it. The HTML
report is served with a Content-Security-Policy that allows no script at all.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException, Query
from fastapi.responses import Response

from analyst_env.run_records.report import build_report
from analyst_env.run_records.run_log import (
    LOG_NAME,
    REPORT_HTML,
    RUN_ID,
    latest_rows,
    read_log,
    runs_dir,
)
from analyst_env.server.web.replay import NAME as TRAJECTORY_NAME
from analyst_env.trajectory_files import trajectories_dir

MAX_LISTED = 200
REPORT_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
HEADLINE = (
    "run_id",
    "dataset",
    "policy",
    "model",
    "sampling",
    "samples",
    "n",
    "episodes",
    "complete",
    "mean_reward",
    "accuracy",
    "pass_at_k",
    "errors",
    "tokens",
    "started_at",
    "finished_at",
)


class RunNotFound(LookupError):
    """No eval run has this id."""


def _run_dir(state_dir: str | Path, run_id: str) -> Path:
    path = runs_dir(state_dir) / run_id
    if not RUN_ID.match(run_id) or run_id in (".", "..") or not (path / LOG_NAME).is_file():
        raise RunNotFound(f"no eval run named {run_id!r}")
    return path


def load_run(state_dir: str | Path, run_id: str) -> dict[str, Any]:
    """The report of one run, rebuilt from its log.

    Raises:
        RunNotFound: The id is malformed, or no run has it.
    """
    path = _run_dir(state_dir, run_id)
    parsed = read_log(path / LOG_NAME)
    if parsed is None:
        raise RunNotFound(f"the log of run {run_id!r} has no header")
    header, rows = parsed
    report = build_report({**header, "run_id": run_id}, latest_rows(rows))
    report["has_html"] = (path / REPORT_HTML).is_file()
    report["updated_at"] = (path / LOG_NAME).stat().st_mtime
    return report


def list_runs(state_dir: str | Path) -> list[dict[str, Any]]:
    """The headline of every run, most recently updated first (at most 200)."""
    root = runs_dir(state_dir)
    try:
        names = [n for n in os.listdir(root) if RUN_ID.match(n) and (root / n / LOG_NAME).is_file()]
    except FileNotFoundError:
        return []
    names.sort(key=lambda n: (root / n / LOG_NAME).stat().st_mtime, reverse=True)
    listed = []
    for name in names[:MAX_LISTED]:
        try:
            report = load_run(state_dir, name)
        except (RunNotFound, OSError, ValueError, KeyError, TypeError):
            continue  # a log another process is writing or someone broke: not this page's fault
        listed.append({k: report.get(k) for k in (*HEADLINE, "updated_at")})
    return listed


def link_trajectories(state_dir: str | Path, report: dict[str, Any]) -> None:
    """Add ``trajectory`` (the recording's file name, newest first) to each episode row."""
    try:
        names = sorted(
            (n for n in os.listdir(trajectories_dir(state_dir)) if TRAJECTORY_NAME.match(n)),
            reverse=True,
        )
    except FileNotFoundError:
        names = []
    by_episode: dict[str, str] = {}
    for name in names:  # "<stamp>-<episode id>.jsonl"; the stamp has no '-'
        by_episode.setdefault(name.split("-", 1)[-1][: -len(".jsonl")], name)
    for row in report.get("episode_rows") or []:
        row["trajectory"] = by_episode.get(str(row.get("episode_id")))


def compare_runs(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two reports side by side: both headlines, then every task with both mean rewards."""
    tasks_a = {t["task_id"]: t for t in a.get("tasks") or []}
    tasks_b = {t["task_id"]: t for t in b.get("tasks") or []}
    counts = {"a_better": 0, "b_better": 0, "same": 0, "only_a": 0, "only_b": 0}
    rows = []
    for task_id in [*tasks_a, *(t for t in tasks_b if t not in tasks_a)]:
        ta, tb = tasks_a.get(task_id), tasks_b.get(task_id)
        if ta is None or tb is None:
            verdict = "only_a" if tb is None else "only_b"
            delta = None
        else:
            delta = tb["reward"] - ta["reward"]
            verdict = "same" if abs(delta) < 1e-9 else ("b_better" if delta > 0 else "a_better")
        counts[verdict] += 1
        some = ta or tb or {}
        rows.append(
            {
                "task_id": task_id,
                "level": some.get("level"),
                "category": some.get("category"),
                "a": _side(ta),
                "b": _side(tb),
                "delta": delta,
                "verdict": verdict,
            }
        )
    return {
        "a": {k: a.get(k) for k in HEADLINE},
        "b": {k: b.get(k) for k in HEADLINE},
        "counts": counts,
        "tasks": rows,
    }


def _side(task: dict[str, Any] | None) -> dict[str, Any] | None:
    if task is None:
        return None
    return {k: task.get(k) for k in ("reward", "solved", "samples", "failures", "error")}


def runs_router(state_dir: str | Path) -> APIRouter:
    """``/web/api/runs``, ``/web/api/runs/{id}``, its ``report.html`` and the comparison."""
    router = APIRouter()

    def one(run_id: str) -> dict[str, Any]:
        try:
            return load_run(state_dir, run_id)
        except RunNotFound as exc:
            raise HTTPException(404, str(exc)) from None

    @router.get("/web/api/runs")
    def web_runs() -> dict:
        """Eval runs found in this server's state directory, newest first."""
        return {"runs": list_runs(state_dir), "runs_dir": str(runs_dir(state_dir))}

    @router.get("/web/api/runs-compare")
    def web_runs_compare(a: str = Query(...), b: str = Query(...)) -> dict:
        """Runs ``a`` and ``b`` task by task."""
        return compare_runs(one(a), one(b))

    @router.get("/web/api/runs/{run_id}")
    def web_run(run_id: str) -> dict:
        """One run's report, each episode linked to its recorded trajectory."""
        report = one(run_id)
        link_trajectories(state_dir, report)
        return report

    @router.get("/web/api/runs/{run_id}/report.html")
    def web_run_html(run_id: str) -> Response:
        """The run's self-contained HTML report (no scripts allowed to run in it)."""
        path = _run_dir_or_404(state_dir, run_id) / REPORT_HTML
        if not path.is_file():
            raise HTTPException(
                404, f"run {run_id!r} has no HTML report yet (it is written when the run ends)"
            )
        return Response(
            path.read_bytes(),
            media_type="text/html",
            headers={"Content-Security-Policy": REPORT_CSP},
        )

    return router


def _run_dir_or_404(state_dir: str | Path, run_id: str) -> Path:
    try:
        return _run_dir(state_dir, run_id)
    except RunNotFound as exc:
        raise HTTPException(404, str(exc)) from None
