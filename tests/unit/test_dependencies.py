"""Imports between the package's parts go one way (docs/architecture.md, "Who owns what").

``envs/`` is the sandbox and knows nothing of the server; ``verifiers/`` scores a task and
needs only ``task_format.py``; ``datasets/`` makes tasks; ``client/`` talks to a server
over the network and never imports it (OpenEnv's own rule). Every import statement,
lazy ones inside functions included, is checked (ruff's TID252 keeps them absolute).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

FORBIDDEN = {
    "envs": {"server", "client", "datasets", "verifiers", "benchmarks"},
    "verifiers": {"server", "client", "datasets", "envs", "benchmarks"},
    "datasets": {"server", "client", "envs", "benchmarks"},
    "client": {"server"},
}


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    return names


def _violations(part: str) -> set[tuple[str, str]]:
    found = set()
    for path in (REPO / part).rglob("*.py"):
        for name in _imports(path):
            pieces = name.split(".")
            if pieces[0] == "analyst_env" and len(pieces) > 1 and pieces[1] in FORBIDDEN[part]:
                found.add((path.relative_to(REPO).as_posix(), name))
    return found


@pytest.mark.parametrize("part", sorted(FORBIDDEN))
def test_imports_go_one_way(part):
    assert _violations(part) == set()
