"""docs/tasks.md publishes the template table as the code prints it (not typed by hand)."""

from pathlib import Path

from analyst_env.datasets.procedural.coverage import template_table

DOC = Path(__file__).resolve().parents[2] / "docs" / "tasks.md"


def test_the_template_table_in_the_docs_is_the_one_the_code_prints():
    assert template_table() in DOC.read_text(encoding="utf-8"), (
        "docs/tasks.md is out of date: paste the output of "
        "`python -m analyst_env.datasets.procedural.coverage`"
    )
