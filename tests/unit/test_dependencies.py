"""Imports between the package's parts go one way (docs/architecture.md, "Who owns what").

``envs/`` is the sandbox and knows nothing of the server; ``verifiers/`` scores a task and
needs only ``task_format.py``; ``datasets/`` makes tasks; ``run_records/`` and the shared
root modules (``models.py``, ``prompts.py``, ...) sit below the server, which reads them;
``client/`` talks to a server over the network and never imports it (OpenEnv's own rule);
``evaluation/`` and ``trainers/`` are built on the client and never import the server, and
the server imports neither them nor the client. Every import statement, lazy ones inside
functions included, is checked (ruff's TID252 keeps them absolute).

Inside ``envs/`` the backends are links of one interface: ``envs/kernel/`` (what runs
inside every sandbox) imports no backend, no backend imports another, and the interface
(``envs/*.py``) names backends only as lazy entry-point strings (``envs/backends.py``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

ABOVE_THE_SERVER = {"client", "evaluation", "trainers", "benchmarks", "gymnasium_entry"}
BELOW_THE_SERVER = ABOVE_THE_SERVER | {
    "server",
    "cli",
    "serve_cli",
    "backends_cli",
    "eval_cli",
    "export_cli",
    "envs_cli",
    "cli_checks",
}
SHARED = BELOW_THE_SERVER | {"envs", "datasets", "verifiers", "run_records"}

FORBIDDEN = {
    "envs": SHARED,
    "verifiers": SHARED,
    "datasets": SHARED - {"verifiers"},
    "run_records": SHARED,
    "server": ABOVE_THE_SERVER,
    "client": SHARED | {"run_records", "prompts"},
    "trainers": BELOW_THE_SERVER - {"client"} | {"envs", "verifiers", "run_records"},
    "evaluation": BELOW_THE_SERVER - {"client", "trainers"} | {"envs"},
    # benchmarks start servers (as processes, or the in-thread one of server/local_server.py)
    # and drive the trainer adapters they measure (benchmarks/adapter_drivers.py)
    "benchmarks": BELOW_THE_SERVER - {"client", "benchmarks", "server", "trainers"} | {"envs"},
    # the shared modules at the package root
    "models.py": SHARED,
    "task_format.py": SHARED,
    "prompts.py": SHARED,
    "trajectory_files.py": SHARED,
    "paths.py": SHARED,
    "openenv_compat.py": SHARED,
    "moved_modules.py": SHARED,
}

# The old names of what moved out of client/: each only aliases its new home
# (analyst_env.moved_modules), so these may import what moved out of them, and nothing else.
OLD_NAMES = ("client/evaluation", "client/trainers", "client/local_server.py")
MOVED_TO = ("evaluation", "trainers", "run_records", "prompts", "moved_modules")


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


def _files(root: Path, part: str) -> list[Path]:
    where = root / part
    if where.is_file():
        return [where]
    old = [root / name for name in OLD_NAMES]
    return [p for p in where.rglob("*.py") if not any(p.is_relative_to(o) for o in old)]


def _violations(part: str, root: Path = REPO) -> set[tuple[str, str]]:
    forbidden = FORBIDDEN[part] - {part.removesuffix(".py")}  # a part may import itself
    found = set()
    for path in _files(root, part):
        for name in _imports(path):
            pieces = name.split(".")
            if pieces[0] == "analyst_env" and len(pieces) > 1 and pieces[1] in forbidden:
                found.add((path.relative_to(root).as_posix(), name))
    return found


@pytest.mark.parametrize("part", sorted(FORBIDDEN))
def test_imports_go_one_way(part):
    assert (REPO / part).exists()
    assert _violations(part) == set()


def test_every_package_has_a_rule():
    packages = {p.parent.name for p in REPO.glob("*/__init__.py")} - {"tests", "deploy"}
    assert packages - set(FORBIDDEN) == set()


@pytest.mark.parametrize(
    ("part", "module", "statement"),
    [
        ("server", "web/page.py", "from analyst_env.client import AnalystEnv"),
        ("server", "shown.py", "def f():\n    import analyst_env.trainers.trl\n"),
        ("server", "runs.py", "from analyst_env.evaluation.run import run_eval"),
        ("client", "x.py", "from analyst_env.server.app import app"),
        ("client", "y.py", "from analyst_env.evaluation import engine"),
        ("trainers", "z.py", "import analyst_env.server.tools"),
        ("evaluation", "w.py", "from analyst_env.server import in_process"),
        ("prompts.py", "", "from analyst_env.server.tools import TOOLS"),
    ],
)
def test_a_wrong_way_import_is_caught(tmp_path, part, module, statement):
    """The check fails on each kind of import it forbids, lazy ones too."""
    path = tmp_path / part / module if module else tmp_path / part
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(statement + "\n")
    assert _violations(part, tmp_path) != set()


@pytest.mark.parametrize("old", OLD_NAMES)
def test_old_names_only_alias_their_new_homes(old):
    where = REPO / old
    paths = [where] if where.is_file() else list(where.glob("*.py"))
    moved_to = ("moved_modules", "server") if where.is_file() else MOVED_TO
    for path in paths:
        body = ast.parse(path.read_text()).body
        assert len(body) <= 4, path  # docstring, two imports, the alias call
        for name in _imports(path):
            assert name.split(".")[1] in moved_to, (path, name)


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
