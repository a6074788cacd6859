"""Serving our own endpoint in place of one of OpenEnv's HTTP routes, documented as it was.

Several of OpenEnv's ``POST`` routes need a check in front of them (an action's
shape, a reset's errors as 4xx and its session slot, the drain, sibling workers) or
are answered by us outright (``/mcp``, on our sessions). :func:`replace_post_route`
takes the route out, hands its endpoint to a wrapper (which may call it or not) and
adds the wrapper back at the same path with the original's name, tags, summary,
description and responses, so the OpenAPI schema and operation ids read as they did.
Only public Starlette and FastAPI attributes of the route are read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

Endpoint = Callable[..., Any]


def replace_post_route(
    app: FastAPI, path: str, wrap: Callable[[Endpoint], Endpoint], **overrides: Any
) -> bool:
    """Serve ``wrap(original endpoint)`` at ``POST path`` instead of the original.

    ``overrides`` go to ``add_api_route`` over the original's documentation
    (``response_model``, ``responses``). False, and nothing changed, where ``app`` has
    no such route (OpenEnv's production mode serves no simulation routes).
    """
    route = next(
        (
            r
            for r in app.router.routes
            if isinstance(r, APIRoute) and r.path == path and "POST" in (r.methods or ())
        ),
        None,
    )
    if route is None:
        return False
    app.router.routes.remove(route)
    docs = {
        "name": route.name,
        "tags": route.tags,
        "summary": route.summary,
        "description": route.description,
        "responses": route.responses,
    }
    app.add_api_route(path, wrap(route.endpoint), methods=["POST"], **(docs | overrides))
    return True


def remove_routes(app: FastAPI, *paths: str, kind: type[BaseRoute] = BaseRoute) -> None:
    """Take the routes of type ``kind`` (any, by default) at ``paths`` out of ``app``, to serve
    our own there."""
    app.router.routes[:] = [
        r
        for r in app.router.routes
        if not (isinstance(r, kind) and getattr(r, "path", None) in paths)
    ]
