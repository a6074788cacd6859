"""Taking one of OpenEnv's HTTP routes out of an app to serve a wrapper in its place.

Several of OpenEnv's ``POST`` routes need a check in front of them (an action's
shape, a reset's errors as 4xx, the drain, sibling workers). Each wrapper takes
the route out with :func:`take_post_route`, calls the original endpoint, and is
added back at the same path with :func:`docs_of` the original, so the OpenAPI
schema and operation ids read as they did.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute


def take_post_route(app: FastAPI, path: str) -> APIRoute | None:
    """Remove the ``POST`` route at ``path`` from ``app`` and return it; ``None`` where
    ``app`` has none (OpenEnv's production mode serves no simulation routes)."""
    route = next(
        (
            r
            for r in app.router.routes
            if isinstance(r, APIRoute) and r.path == path and "POST" in (r.methods or ())
        ),
        None,
    )
    if route is not None:
        app.router.routes.remove(route)
    return route


def docs_of(route: APIRoute) -> dict[str, Any]:
    """What ``add_api_route`` needs to describe a wrapper as ``route`` was described."""
    return {
        "name": route.name,
        "tags": route.tags,
        "summary": route.summary,
        "description": route.description,
        "responses": route.responses,
    }
