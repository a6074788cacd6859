"""The docstring examples of the dataset modules stay true."""

import doctest
import importlib

import pytest


@pytest.mark.parametrize(
    "module",
    [
        "preview",
        "dabench",
        "registry",
        "procedural.grammar",
        "procedural.draft",
        "starter_set",
        "procedural.workbook_draft",
    ],
)
def test_doctests(module):
    result = doctest.testmod(importlib.import_module(f"analyst_env.datasets.{module}"))
    assert result.failed == 0
