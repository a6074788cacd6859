"""The /web debugging UI: static page, task details, file previews, replay and the live feed.

The page is plain HTML/CSS/JS from ``static/`` (no build step, nothing fetched
from the internet). It plays episodes over OpenEnv's own ``/ws`` protocol, so
each browser tab is its own session exactly like a trainer, and it lists tasks
through OpenEnv's Task API. The JSON routes here add only what those lack:
a task's file previews, recorded trajectories, and the live feed.

Routes that read files are plain ``def``: FastAPI runs them in its thread
pool, so a slow preview (a large workbook, a COUNT over a big table) never
stalls the event loop that carries every episode's ``/ws`` frames.

Nothing here exposes ground truth: tasks are shown through
``Task.public_view()``, and trajectories and live events hold only what
observations and the notebook contain.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, HTTPException, Query
from fastapi.responses import FileResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from analyst_env.datasets import describe_file
from analyst_env.server.curriculum_views import curriculum_router
from analyst_env.server.peers import Peers
from analyst_env.server.runtime import Runtime, TaskNotFoundError
from analyst_env.server.web.browse import browse_router, unbounded_info
from analyst_env.server.web.previews import head_preview
from analyst_env.server.web.replay import (
    OriginFilter,
    OutcomeFilter,
    TrajectoryNotFound,
    list_trajectories,
    load_trajectory,
)
from analyst_env.server.web.runs import runs_router
from analyst_env.server.web.stream import live_router

STATIC_DIR = Path(__file__).parent / "static"
NO_CACHE = {"Cache-Control": "no-cache"}
HUB_PAGE_ORIGIN = "https://huggingface.co"
"""Where a Space published with ``base_path: /web`` shows this page, in a frame."""
PAGE_CSP = (
    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
    f"object-src 'none'; base-uri 'none'; frame-ancestors 'self' {HUB_PAGE_ORIGIN}"
)
"""The page runs only its own scripts (should agent output ever slip past ``render.js``'s
sanitizer, no script of its runs) and is framed by no other site than the Hugging Face
Space page that shows it (no click on it is tricked); plots are ``data:`` PNGs and bars are
sized by ``style`` attributes."""


def dataset_of(task: Any) -> str:
    """The dataset a task came from: its ``source``/``dataset`` metadata, else its id prefix."""
    meta = task.metadata or {}
    return str(meta.get("dataset") or meta.get("source") or task.id.split("-", 1)[0])


def mount_web(app: FastAPI, runtime: Runtime, env_name: str) -> None:
    """Serve the debugging UI of ``runtime``'s server at ``/web``."""
    settings = runtime.settings
    router = APIRouter(tags=["Web UI"])

    @router.get("/web", include_in_schema=False)
    async def web_index() -> FileResponse:
        return FileResponse(
            STATIC_DIR / "index.html", headers={**NO_CACHE, "Content-Security-Policy": PAGE_CSP}
        )

    @router.get("/web/", include_in_schema=False)
    async def web_index_slash() -> RedirectResponse:
        return RedirectResponse("/web")

    @router.get("/web/api/info")
    async def web_info() -> dict:
        """What the page needs to start: names, counts, and the routes it talks to."""
        from analyst_env import __version__

        unbounded = unbounded_info(runtime)
        datasets = sorted({dataset_of(t) for t in runtime.tasks} | {u["name"] for u in unbounded})
        return {
            "env_name": env_name,
            "version": __version__,
            "datasets": datasets,
            "splits": runtime.splits(),
            "task_count": len(runtime.tasks),
            "unbounded": unbounded,
            "max_sessions": settings.max_sessions,
            "record_trajectories": settings.record_trajectories,
            "backend": runtime.backend.name,
        }

    task_rows: list[bytes] = []  # the catalogue is fixed once the runtime exists: encode it once

    @router.get("/web/api/tasks")
    async def web_tasks() -> Response:
        """Every served task in a compact form for searching and filtering (no answers)."""
        if not task_rows:
            task_rows.append(json.dumps({"tasks": [_task_row(t) for t in runtime.tasks]}).encode())
        return Response(task_rows[0], media_type="application/json")

    @router.get("/web/api/tasks/{task_id}")
    def web_task(task_id: str) -> dict:
        """One task as the agent sees it: instruction, limits, and the shape of each file."""
        return _task_detail(_task(runtime, task_id))

    @router.get("/web/api/tasks/{task_id}/files/{name:path}")
    def web_task_file(task_id: str, name: str, rows: int = Query(10, ge=1, le=50)) -> dict:
        """The first rows of one input file: CSV head, SQLite schema and rows, Excel sheets."""
        task = _task(runtime, task_id)
        path = task.files.get(name)
        if path is None:
            raise HTTPException(
                404, f"task {task_id!r} has no file {name!r}; files: {sorted(task.files)}"
            )
        return {"name": name, **head_preview(name, path, rows)}

    @router.get("/web/api/trajectories")
    def web_trajectories(
        limit: int = Query(100, ge=1, le=500),
        offset: int = Query(0, ge=0),
        q: str = "",
        outcome: OutcomeFilter = "",
        origin: OriginFilter = "",
        run: str = "",
    ) -> dict:
        """Recorded episodes, newest first, with reward, outcome, origin, step count and status;
        filtered by text (``q``), ``outcome``, ``origin`` and eval ``run``, paged by ``offset``."""
        listing = list_trajectories(
            settings.state_dir,
            limit=limit,
            offset=offset,
            query=q,
            outcome=outcome,
            origin=origin,
            run=run,
        )
        return {**listing, "recording": settings.record_trajectories}

    @router.get("/web/api/trajectories/{name}")
    def web_trajectory(name: str) -> dict:
        """Every record of one recorded episode: reset, steps (with cells and timings), end."""
        try:
            return load_trajectory(settings.state_dir, name)
        except TrajectoryNotFound as exc:
            raise HTTPException(404, str(exc)) from None

    app.include_router(router)
    app.include_router(runs_router(settings.state_dir), tags=["Web UI"])
    app.include_router(curriculum_router(runtime.curriculum))
    app.include_router(browse_router(runtime, _task_row))
    app.include_router(live_router(runtime.live, Peers.from_env(settings.token)), tags=["Web UI"])
    app.mount("/web/static", StaticFiles(directory=STATIC_DIR), name="web-static")


def _task(runtime: Runtime, task_id: str) -> Any:
    try:
        return runtime.task(task_id)
    except TaskNotFoundError as exc:
        raise HTTPException(404, str(exc)) from None


def _task_detail(task: Any) -> dict:
    """A task as the Task API shows it, with its files' shapes and why it is quarantined
    (a reset never draws it), if it is: the catalogue's evidence, for the person debugging;
    observations never carry it."""
    files = [describe_file(name, path).model_dump() for name, path in sorted(task.files.items())]
    return {
        **task.public_view(),
        "dataset": dataset_of(task),
        "files": files,
        "quarantined": task.quarantine_reason,
    }


def _task_row(task: Any) -> dict:
    meta = task.metadata or {}
    return {
        "id": task.id,
        "dataset": dataset_of(task),
        "split": task.split,
        "kind": meta.get("kind"),
        "level": meta.get("level"),
        "category": meta.get("category"),
        "domain": meta.get("domain"),
        "instruction": task.instruction[:300],
        "files": sorted(task.files),
        "quarantined": task.quarantine_reason is not None,  # never drawn; the evidence stays out
    }
