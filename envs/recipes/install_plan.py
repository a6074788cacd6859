"""One install plan per recipe, which each backend renders in its own build language.

A recipe names packages; the plan says what to install, in which order and
from which index: apt sources, apt packages (plus ``nodejs``/``npm`` when npm
packages need them), the Python lists, npm packages. The Dockerfile
(``remote.dockerfile``), the Modal image (``remote.modal_backend``), the E2B
template (``remote.e2b_template``) and the local baker (``local_bake``) each
turn the same plan into steps, so a rule (say, one installer call per index)
lives in one place.
"""

from __future__ import annotations

from dataclasses import dataclass

from analyst_env.envs.recipes.recipe import Recipe


@dataclass(frozen=True)
class PythonStep:
    """One installer call: ``packages`` from ``index_url`` (None: the default index)."""

    label: str
    """Which recipe lists it holds: ``pip``, ``uv`` or ``pip+uv``."""
    packages: list[str]
    index_url: str | None


@dataclass(frozen=True)
class InstallPlan:
    """What a recipe installs, in order. Empty lists are steps to skip."""

    apt_sources: str | None
    """A ``sources.list`` line to add before installing apt packages."""
    apt: list[str]
    """apt packages, with ``nodejs`` and ``npm`` added when npm packages need them."""
    python: list[PythonStep]
    """Each non-empty Python list on its own (the local baker resolves them one by one)."""
    python_by_index: list[PythonStep]
    """The Python lists as installer calls: one per index, pip and uv together when
    they share one."""
    npm: list[str]
    npm_registry: str | None


def install_plan(recipe: Recipe) -> InstallPlan:
    """The plan for ``recipe``."""
    python = [
        PythonStep(label, packages, index)
        for label, packages, index in (
            ("pip", recipe.pip, recipe.pip_index_url),
            ("uv", recipe.uv, recipe.uv_index_url),
        )
        if packages
    ]
    if recipe.pip_index_url == recipe.uv_index_url:
        together = recipe.python_requirements
        by_index = [PythonStep("pip+uv", together, recipe.pip_index_url)] if together else []
    else:
        by_index = list(python)
    return InstallPlan(
        apt_sources=recipe.apt_sources,
        apt=_apt_packages(recipe),
        python=python,
        python_by_index=by_index,
        npm=list(recipe.npm),
        npm_registry=recipe.npm_registry,
    )


def _apt_packages(recipe: Recipe) -> list[str]:
    apt = list(dict.fromkeys(recipe.apt))
    if recipe.npm and not {"nodejs", "npm"} <= {p.split("=")[0] for p in apt}:
        apt += [p for p in ("nodejs", "npm") if p not in apt]  # npm packages need node
    return apt
