"""The curriculum as ``/metrics`` gauges and a small ``/web/curriculum`` view, per client.

Both read the state files every worker and replica writes (``server/curriculum.py``),
so any worker's scrape or page shows every client. Each client's rows hold its
depth, its counts and why its depth last moved: rewards only, nothing of a task's gold.
"""

from __future__ import annotations

import html
from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from analyst_env.server.curriculum import Curriculum

VIEW_CSP = "default-src 'none'; style-src 'unsafe-inline'"


def _rows(curriculum: Curriculum) -> list[dict[str, Any]]:
    return [
        {
            "client": c.get("client", ""),
            "depth": c.get("depth"),
            "episodes": c.get("episodes", 0),
            "successes": c.get("successes", 0),
            "success_rate": c.get("successes", 0) / c["episodes"] if c.get("episodes") else None,
            "window": c.get("window", []),
            "last_change": c.get("last_change", ""),
        }
        for c in curriculum.snapshot()
    ]


class _Collector:
    def __init__(self, curriculum: Curriculum) -> None:
        self.curriculum = curriculum

    def describe(self) -> list:
        return []

    def collect(self):
        depth = GaugeMetricFamily(
            "analyst_env_curriculum_depth",
            "Depth the curriculum serves a client",
            labels=["client"],
        )
        episodes = GaugeMetricFamily(
            "analyst_env_curriculum_episodes", "Episodes a client finished", labels=["client"]
        )
        rate = GaugeMetricFamily(
            "analyst_env_curriculum_success_rate",
            "A client's share of episodes with reward 1",
            labels=["client"],
        )
        for row in _rows(self.curriculum):
            depth.add_metric([row["client"]], row["depth"])
            episodes.add_metric([row["client"]], row["episodes"])
            rate.add_metric([row["client"]], row["success_rate"] or 0.0)
        yield from (depth, episodes, rate)
        yield GaugeMetricFamily(
            "analyst_env_curriculum_target",
            "Success rate the curriculum aims at",
            value=self.curriculum.target,
        )


def exposition(curriculum: Curriculum | None) -> bytes:
    """The curriculum's gauges in Prometheus text (empty when no curriculum is on)."""
    if curriculum is None:
        return b""
    registry = CollectorRegistry()
    registry.register(_Collector(curriculum))
    return generate_latest(registry)


def curriculum_router(curriculum: Curriculum | None) -> APIRouter:
    """``/web/curriculum`` (JSON) and ``/web/curriculum.html`` (a table, no script)."""
    router = APIRouter(tags=["Web UI"])

    @router.get("/web/curriculum")
    def curriculum_json() -> dict[str, Any]:
        if curriculum is None:
            return {"enabled": False, "clients": []}
        return {"enabled": True, "target": curriculum.target, "clients": _rows(curriculum)}

    @router.get("/web/curriculum.html", include_in_schema=False)
    def curriculum_page() -> HTMLResponse:
        body = curriculum_json()
        cells = "".join(
            "<tr>"
            + "".join(
                f"<td>{html.escape(str(r[k]))}</td>"
                for k in ("client", "depth", "episodes", "success_rate", "last_change")
            )
            + "</tr>"
            for r in body["clients"]
        )
        head = "".join(
            f"<th>{k}</th>" for k in ("client", "depth", "episodes", "success rate", "last change")
        )
        title = (
            f"Curriculum: target success {body['target']}" if body["enabled"] else "No curriculum"
        )
        page = (
            f"<!doctype html><title>Curriculum</title><h1>{html.escape(title)}</h1>"
            f"<table border=1><tr>{head}</tr>{cells}</table>"
        )
        return HTMLResponse(page, headers={"Content-Security-Policy": VIEW_CSP})

    return router
