"""Expose the tools as a FastMCP server for OpenEnv's ``/mcp`` JSON-RPC route.

OpenEnv's server answers ``tools/list`` from an environment's ``mcp_server`` and
answers ``tools/call`` by calling the tool's ``fn`` directly. Each tool here is
a FastMCP ``FunctionTool`` with the same name, description and JSON Schema as
``tools.TOOLS``, whose ``fn`` forwards to the environment's own dispatch, so a
call over ``/mcp`` is validated, counted and scored exactly like a ``/ws`` step.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastmcp import FastMCP
from fastmcp.tools.function_tool import FunctionTool

from analyst_env.server.tools import TOOLS

Dispatch = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


def build_mcp_server(dispatch: Dispatch) -> FastMCP:
    """A FastMCP server whose tools call ``dispatch(name, arguments)``."""
    server = FastMCP("analyst_env")
    for name, tool in TOOLS.items():
        spec = tool.spec()
        server.add_tool(
            FunctionTool(
                name=name,
                description=spec.description,
                parameters=spec.input_schema,
                fn=_forward(dispatch, name),
            )
        )
    return server


def _forward(dispatch: Dispatch, name: str) -> Callable[..., Awaitable[dict[str, Any]]]:
    async def call(**arguments: Any) -> dict[str, Any]:
        return await dispatch(name, arguments)

    call.__name__ = name
    return call
