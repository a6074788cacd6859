"""The wheel ships every package of the source tree.

``pyproject.toml`` lists the packages explicitly (the repository root is the package, so
automatic discovery would pick up ``tests`` and ``deploy``); a new subpackage left out of
the list would be missing from the published wheel and image while the editable checkout
kept working.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NOT_SHIPPED = {"tests", "deploy", "build", "docs"}


def _source_packages() -> set[str]:
    found = {"analyst_env"}
    for init in REPO.rglob("__init__.py"):
        rel = init.parent.relative_to(REPO)
        if not rel.parts or rel.parts[0] in NOT_SHIPPED or rel.parts[0].startswith("."):
            continue
        found.add(".".join(("analyst_env", *rel.parts)))
    return found


def test_every_source_package_is_in_the_wheel():
    listed = set(
        tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    assert _source_packages() - listed == set()
    assert listed - _source_packages() == set()
