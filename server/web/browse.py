"""``/web/api/browse``: page through a dataset whose tasks are made on demand (``procedural``).

Such a dataset cannot be listed, so the page asks for one page at a time:
a split, a start index and filters (category, domain, level, kind, text). The
dataset skips indices that cannot match without making them and says where the
next page starts. Rows carry public fields only (``Task.public_view``).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Query

from analyst_env.server.runtime import Runtime

PAGE_MAX = 50


def unbounded_info(runtime: Runtime) -> list[dict[str, Any]]:
    """Name, split sizes and searchable values of each unbounded dataset served."""
    return [
        {"name": ds.name, "splits": {s: ds.size(s) for s in ds.splits()}, "facets": ds.facets()}
        for ds in runtime.unbounded
    ]


def browse_router(runtime: Runtime, row: Any) -> APIRouter:
    """The route; ``row`` turns a task into the compact row the task table shows."""
    router = APIRouter(tags=["Web UI"])

    @router.get("/web/api/browse")
    def web_browse(
        dataset: str,
        split: str = "train",
        start: int = Query(0, ge=0),
        limit: int = Query(25, ge=1, le=PAGE_MAX),
        category: str = "",
        domain: str = "",
        level: str = "",
        kind: str = "",
        q: str = Query("", max_length=200),
    ) -> dict:
        """One page of an unbounded dataset's split, filtered; ``next_start`` continues it."""
        ds = next((d for d in runtime.unbounded if d.name == dataset), None)
        if ds is None:
            names = [d.name for d in runtime.unbounded]
            raise HTTPException(404, f"no unbounded dataset {dataset!r} is served; served: {names}")
        if split not in ds.splits():
            raise HTTPException(404, f"unknown split {split!r}; splits: {ds.splits()}")
        if start >= ds.size(split):
            raise HTTPException(
                400, f"start {start} is past the end of {split!r} ({ds.size(split)} tasks)"
            )
        where = {"category": category, "domain": domain, "level": level, "kind": kind}
        page = ds.search(split, start, limit, where, q.strip())
        return {
            "tasks": [row(t) for t in page["tasks"]],
            "next_start": page["next_start"],
            "exhausted": page["exhausted"],
            "start": start,
        }

    return router
