"""Imports between the package's parts go one way (docs/architecture.md, "Who owns what").

``envs/`` is the sandbox and knows nothing of the server; ``verifiers/`` scores a task and
needs only ``task_format.py``; ``datasets/`` makes tasks; ``client/`` talks to a server
over the network and never imports it (OpenEnv's own rule). Every import statement,
lazy ones inside functions included, is checked (ruff's TID252 keeps them absolute).

Inside ``envs/`` the backends are links of one interface: ``envs/kernel/`` (what runs
inside every sandbox) imports no backend, no backend imports another, and the interface
(``envs/*.py``) names backends only as lazy entry-point strings (``envs/backends.py``).
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


# Inside envs/: a folder (or "envs/*.py", the top-level modules) -> envs subpackages it
# must not import.
ENVS_FORBIDDEN = {
    "envs/kernel": {"local", "remote", "recipes"},
    "envs/local": {"remote"},
    "envs/remote": {"local"},
    "envs/*.py": {"local", "remote"},
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


def _envs_violations(part: str) -> set[tuple[str, str]]:
    paths = (REPO / "envs").glob("*.py") if part == "envs/*.py" else (REPO / part).rglob("*.py")
    found = set()
    for path in paths:
        for name in _imports(path):
            pieces = name.split(".")
            if pieces[:2] == ["analyst_env", "envs"] and len(pieces) > 2:
                if pieces[2] in ENVS_FORBIDDEN[part]:
                    found.add((path.relative_to(REPO).as_posix(), name))
    return found


@pytest.mark.parametrize("part", sorted(ENVS_FORBIDDEN))
def test_backends_are_independent_links(part):
    assert _envs_violations(part) == set()


def test_the_envs_rules_catch_an_import_across_backends(tmp_path):
    """The rule reads ``from analyst_env.envs.local import x`` as an import of ``envs.local``."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from analyst_env.envs.local import procctl\nimport analyst_env.envs.local.child\n"
    )
    assert _imports(probe) == ["analyst_env.envs.local", "analyst_env.envs.local.child"]
