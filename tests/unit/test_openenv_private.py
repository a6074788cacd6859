"""The package uses only OpenEnv's public API (docs/architecture.md, "The transport").

OpenEnv's private names (a module or attribute whose name starts with ``_``) can change
in any release without notice; reading them made every upgrade a silent risk. Every
Python file of the package (tests aside) is parsed and refused if it

* imports a private OpenEnv module (``openenv.core.env_server._utils``) or a private
  name from one (``from openenv... import _x``);
* reads, on anything but its own ``self``/``cls``, an attribute that is private to
  OpenEnv's ``HTTPEnvServer`` (``server._sessions``, ``self.server._create_session``),
  directly or through ``getattr``/``setattr``/``hasattr`` with the name written out;
* reaches into a function's closure (``__closure__``, ``cell_contents``,
  ``co_freevars``), which is how a route's private state was once pulled out.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.types import Action, Observation

REPO = Path(__file__).resolve().parents[2]
SKIPPED_DIRS = {".venv", "tests", "__pycache__", "build", "dist", "node_modules"}
CLOSURE_ATTRIBUTES = {"__closure__", "cell_contents", "co_freevars"}


def _server_private_names() -> frozenset[str]:
    """Every single-underscore attribute of an ``HTTPEnvServer`` (its class and an instance)."""
    server = HTTPEnvServer(lambda: None, Action, Observation)
    names = set(dir(server)) | set(vars(server))
    return frozenset(n for n in names if n.startswith("_") and not n.startswith("__"))


PRIVATE = _server_private_names()


def _is_own(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id in ("self", "cls")


def violations(source: str) -> list[str]:
    """What ``source`` reads of OpenEnv's private API (module docstring), one entry each."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] == "openenv":
                names = [a.name for a in node.names]
                parts = node.module.split(".") + names
                if any(p.startswith("_") and not p.startswith("__") for p in parts):
                    found.append(f"from {node.module} import {', '.join(names)}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "openenv" and any(p.startswith("_") for p in parts):
                    found.append(f"import {alias.name}")
        elif isinstance(node, ast.Attribute):
            if node.attr in CLOSURE_ATTRIBUTES:
                found.append(f".{node.attr}")
            elif node.attr in PRIVATE and not _is_own(node.value):
                found.append(f".{node.attr}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) > 1:
                name = node.args[1]
                if (
                    isinstance(name, ast.Constant)
                    and name.value in PRIVATE | CLOSURE_ATTRIBUTES
                    and not _is_own(node.args[0])
                ):
                    found.append(f"{node.func.id}(..., {name.value!r})")
    return found


def _package_files() -> list[Path]:
    return sorted(
        p for p in REPO.rglob("*.py") if not SKIPPED_DIRS & set(p.relative_to(REPO).parts[:-1])
    )


def test_the_package_reads_nothing_private_of_openenv():
    files = _package_files()
    assert any(p.relative_to(REPO).as_posix() == "server/sessions.py" for p in files)
    found = {(p.relative_to(REPO).as_posix(), v) for p in files for v in violations(p.read_text())}
    assert found == set()


@pytest.mark.parametrize(
    "source",
    [
        "from openenv.core.env_server._utils import overrides_method",
        "import openenv.core.env_server._utils",
        "from openenv.core.env_server.http_server import _make_json_serializable",
        "len(app.state.env_server._sessions)",
        "async def f(self):\n    await self.server._create_session()",
        "getattr(server, '_session_lock')",
        "fn.__closure__[0].cell_contents",
    ],
)
def test_each_kind_of_private_read_is_caught(source):
    assert violations(source), source


def test_own_private_attributes_and_public_openenv_names_pass():
    source = (
        "from openenv.core.env_server.types import Action\n"
        "class Sessions:\n"
        "    def __init__(self):\n"
        "        self._sessions = {}\n"
        "        self._lock = None\n"
    )
    assert violations(source) == []
