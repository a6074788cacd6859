"""Every example in the package's docstrings runs and shows what it says.

Examples are documentation a reader copies; one that no longer runs misleads. This walks
every module of the installed package (tests excluded) and runs its doctests, so a new
module's examples are covered without being listed here.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import analyst_env

# Modules that need an optional SDK to import at all (their examples, if any, show it in use).
OPTIONAL = (
    "analyst_env.envs.remote.modal_backend",
    "analyst_env.envs.remote.e2b_backend",
    "analyst_env.trainers.openrlhf_agent",  # openrlhf, in its own folder (.venv/openrlhf)
    "analyst_env.trainers.hud",  # hud, in its own venv (.venv/hud)
    "analyst_env.trainers.verl",  # verl, in its own venv (.venv/verl)
    "analyst_env.trainers.verl_tools",
    "analyst_env.benchmarks.verl_config",  # verl, in its own venv
)
# Deprecated old names of moved modules: each is the moved module, walked under its new name.
OLD_NAMES = (
    "analyst_env.client.evaluation.",
    "analyst_env.client.trainers.",
    "analyst_env.client.local_server",
)


def _modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(analyst_env.__path__, prefix="analyst_env."):
        if ".tests" in info.name or info.name.startswith(("analyst_env.tests", *OLD_NAMES)):
            continue
        names.append(info.name)
    return sorted(names)


def _with_examples(names: list[str]) -> list[str]:
    found = []
    finder = doctest.DocTestFinder(exclude_empty=True)
    for name in names:
        try:
            module = importlib.import_module(name)
        except ImportError:
            if name in OPTIONAL:
                continue
            raise
        if any(test.examples for test in finder.find(module)):
            found.append(name)
    return found


MODULES = _with_examples(_modules())


def test_the_walk_finds_the_documented_modules():
    # Guards the walk itself: a broken walk would otherwise pass by running nothing.
    assert "analyst_env.verifiers.normalize" in MODULES
    assert "analyst_env.task_format" in MODULES
    assert len(MODULES) >= 9


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
