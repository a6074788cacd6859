"""No source file over 400 lines, and a README a reader can take in one sitting.

A module that long has usually taken on a second job; it is split by responsibility
(one module per purpose, each with its own docstring), never squeezed under the limit.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MAX_LINES = 400
MAX_README_LINES = 250
NOT_SOURCE = {"tests", "build", "__pycache__"}
"""Top-level and nested folders whose ``.py`` files are not the package's source
(hidden folders such as ``.venv`` are skipped too)."""


def _lines(path: Path) -> int:
    with path.open("rb") as fh:
        return sum(1 for _ in fh)


def _source_files() -> list[Path]:
    found = []
    for path in REPO.rglob("*.py"):
        parts = path.relative_to(REPO).parts
        if any(p in NOT_SOURCE or p.startswith(".") or p.endswith(".egg-info") for p in parts):
            continue
        found.append(path)
    return sorted(found)


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def test_the_walk_finds_the_package_source():
    # Guards the walk itself: a walk that found nothing would pass every check below.
    names = {_rel(p) for p in _source_files()}
    assert {"models.py", "verifiers/scorers.py", "server/app.py"} <= names
    assert not any(n.startswith("tests/") for n in names)


def test_no_source_file_is_over_the_limit():
    over = {_rel(p): _lines(p) for p in _source_files() if _lines(p) > MAX_LINES}
    assert over == {}, (
        f"over {MAX_LINES} lines: split each by responsibility (one module per purpose), "
        "not by squeezing"
    )


def test_the_readme_is_short():
    lines = _lines(REPO / "README.md")
    assert lines <= MAX_README_LINES, (
        f"README.md is {lines} lines (at most {MAX_README_LINES}): move detail to docs/"
    )
