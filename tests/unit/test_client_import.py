"""A client process loads the client, not a server.

``import analyst_env.client`` needs openenv's wire types and WebSocket client; openenv's
packages would also import its server stack (FastAPI, FastMCP, Gradio, the MCP SDK) and
every trainer worker would pay for it at start (``openenv_compat.load_openenv_wire``).
Checked by what a fresh interpreter has imported, not by a timing: the time itself is
a figure of ``analyst-env bench`` ("client import").
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

SERVER_STACK = {"fastapi", "starlette", "uvicorn", "gradio", "fastmcp", "mcp"}

LIST_IMPORTED = (
    "import json, sys; print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
)


def _top_level_modules_after(statement: str, env: dict[str, str] | None = None) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", f"{statement}\n{LIST_IMPORTED}"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout))


@pytest.mark.parametrize(
    "statement",
    [
        "import analyst_env.client",
        "from analyst_env.client import AnalystEnv",
        "import analyst_env.client.resume, analyst_env.client.endpoints",
        "import analyst_env.client.gym_env",
        "import analyst_env.models",
    ],
)
def test_the_client_imports_no_server_stack(statement):
    imported = _top_level_modules_after(statement)
    assert "openenv" in imported or "analyst_env" in imported  # the probe ran the import
    assert imported & SERVER_STACK == set()


def test_the_client_still_reaches_all_of_openenv():
    """A client process that asks for openenv's server side gets all of it, the same classes."""
    code = (
        "import analyst_env.client\n"
        "from analyst_env.models import Observation\n"
        "from openenv.core import EnvClient\n"
        "from openenv.core.env_server import Observation as ServerObservation, create_app\n"
        "from analyst_env.client.analyst_client import EnvClient as ClientBase\n"
        "assert EnvClient is ClientBase and Observation is ServerObservation\n"
        "import sys; print('fastapi' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


def test_the_server_imports_openenv_in_full_after_the_client():
    code = (
        "import analyst_env.client\n"
        "from analyst_env.server.app import app\n"
        "import sys, openenv.core.env_server as s\n"
        "print(s.MCPEnvironment is not None, 'gradio' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False"]
