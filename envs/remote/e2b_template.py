"""The E2B template of a recipe: its install plan rendered with E2B's Template SDK."""

from __future__ import annotations

import shlex
from types import ModuleType
from typing import Any

from analyst_env.envs.recipes.install_plan import install_plan
from analyst_env.envs.recipes.recipe import Recipe
from analyst_env.envs.remote import runner_image


def template_builder(sdk_core: ModuleType, recipe: Recipe) -> Any:
    """The Template SDK definition of ``recipe`` (nothing is built until ``Template.build``)."""
    plan = install_plan(recipe)
    template = sdk_core.Template().from_template("code-interpreter-v1")
    if plan.apt_sources:
        template = template.run_cmd(
            f"echo {shlex.quote(plan.apt_sources)} > {runner_image.APT_SOURCES_FILE}", user="root"
        )
    if plan.apt:
        template = template.apt_install(plan.apt, no_install_recommends=True)
    for step in plan.python_by_index:
        if step.index_url:
            quoted = " ".join(shlex.quote(p) for p in step.packages)
            index = shlex.quote(step.index_url)
            template = template.run_cmd(f"pip install --index-url {index} {quoted}", user="root")
        else:
            template = template.pip_install(step.packages)
    if plan.npm:
        if plan.npm_registry:
            registry = shlex.quote(plan.npm_registry)
            template = template.run_cmd(f"npm config set registry {registry}", user="root")
        template = template.npm_install(plan.npm, g=True)
    return template.set_envs({"MPLBACKEND": "Agg"})
