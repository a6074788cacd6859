"""The docstring examples of the verifier modules stay true."""

import doctest
import importlib

import pytest


@pytest.mark.parametrize(
    "module",
    ["normalize", "scorers", "hooks", "adversarial", "sql_readonly", "sql_compare", "sql_answer"],
)
def test_doctests(module):
    result = doctest.testmod(importlib.import_module(f"analyst_env.verifiers.{module}"))
    assert result.failed == 0
