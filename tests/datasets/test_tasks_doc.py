"""docs/tasks.md publishes the template table as the code prints it (not typed by hand)."""

from pathlib import Path

from analyst_env.datasets.procedural.coverage import template_table
from analyst_env.datasets.procedural.templates import CATEGORIES

DOC = Path(__file__).resolve().parents[2] / "docs" / "tasks.md"


def test_the_template_table_in_the_docs_is_the_one_the_code_prints():
    assert template_table() in DOC.read_text(encoding="utf-8"), (
        "docs/tasks.md is out of date: paste the output of "
        "`python -m analyst_env.datasets.procedural.coverage`"
    )


README = DOC.parents[1] / "README.md"


def _coverage_rows(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| category | csv easy"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


def test_the_readme_coverage_table_is_the_one_in_the_docs():
    """README shows the categories x kinds x levels table; it is the docs' copy, not a stale one."""
    docs = _coverage_rows(DOC.read_text(encoding="utf-8"))
    assert len(docs) == 2 + len(CATEGORIES)
    assert _coverage_rows(README.read_text(encoding="utf-8")) == docs


EXAMPLES = DOC.parent / "task-examples.md"


def test_the_examples_page_is_the_one_the_generator_prints():
    """docs/task-examples.md: one task per category with its worked solution, as the code makes
    them (a changed template, wording or solution shows up here)."""
    from analyst_env.datasets.procedural.examples import render

    page = render()
    assert page.count("\n## ") == len(CATEGORIES)
    assert EXAMPLES.read_text(encoding="utf-8") == page, (
        "docs/task-examples.md is out of date: "
        "python -m analyst_env.datasets.procedural.examples > docs/task-examples.md"
    )
