"""What the generated OpenAPI schema leaves out: the errors routes answer, and our action.

FastAPI documents 200 and 422 on its own. A client generated from the schema, or a
schema-driven test tool, also needs the others: every route that looks something up by
name (a path parameter, the dataset of ``/web/api/browse``, the runs of
``/web/api/runs-compare``) answers 404 when it does not exist, every route behind the
token answers 401 without it (when the server has one), and every route with a body
answers 400 when the body is not JSON. OpenEnv's ``StepRequest`` also declares its
``action`` as any object; this server deserializes a ``CallToolAction`` there, so the
schema says so.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from openenv.core.env_server.mcp_types import CallToolAction

from analyst_env.server.auth import OPEN_PATHS, OPEN_PREFIXES

LOOKUPS_BY_QUERY = frozenset({"/web/api/browse", "/web/api/runs-compare"})
"""Routes without a path parameter that still answer 404 for an unknown name."""

NOT_FOUND = {"description": "Nothing has that name: the detail says what exists"}
UNAUTHORIZED = {"description": "The server has a token and the request lacks it"}
NOT_JSON = {"description": "The body is not valid JSON"}


def document_errors(app: FastAPI) -> None:
    """Make ``app.openapi()`` add the error statuses and the step action to its schema."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = generate()  # cached by FastAPI as app.openapi_schema: completed in place
        for path, operations in schema.get("paths", {}).items():
            for operation in operations.values():
                responses = operation.setdefault("responses", {})
                if "{" in path or path in LOOKUPS_BY_QUERY:
                    responses.setdefault("404", NOT_FOUND)
                if path not in OPEN_PATHS and not path.startswith(OPEN_PREFIXES):
                    responses.setdefault("401", UNAUTHORIZED)
                if "requestBody" in operation:
                    responses.setdefault("400", NOT_JSON)
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        step = components.get("StepRequest", {}).get("properties", {})
        if "action" in step:
            components["CallToolAction"] = CallToolAction.model_json_schema()
            step["action"] = {
                "$ref": "#/components/schemas/CallToolAction",
                "description": "The tool to call and its arguments (see GET /schema)",
            }
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
