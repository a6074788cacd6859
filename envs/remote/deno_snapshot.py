"""A recipe as a Deno snapshot: the shell steps that install it on Deno's own Debian image.

Deno builds no image from a Dockerfile. Its mechanism is a bootable volume made from
``builtin:debian-13``, a sandbox booted with that volume as its root, commands run there,
and ``volumes.snapshot`` of the volume; episodes then boot with ``root=<snapshot slug>``.
So a recipe is rendered here as shell steps from the same install plan the Dockerfile uses.
A recipe that names a base image of its own cannot be baked (the root is always Deno's
Debian) and is refused with that reason. Python packages go into the system interpreter
with uv (Debian marks it externally managed, hence ``--break-system-packages``).
"""

from __future__ import annotations

import shlex

from analyst_env.envs.recipes.install_plan import PythonStep, install_plan
from analyst_env.envs.recipes.recipe import DEFAULT_BASE_IMAGE, Recipe
from analyst_env.envs.remote.runner_image import (
    APT_SOURCES_FILE,
    PACKAGE_ROOT,
    RUNNER_REQUIREMENTS,
    WORKDIR,
)
from analyst_env.envs.sandbox import SandboxError

#: The snapshot every build volume starts from (Deno's Debian 13 with python3).
BASE_SNAPSHOT = "builtin:debian-13"


class BuildFailed(SandboxError):
    """The recipe cannot be baked (a step failed, or Deno cannot boot what it asks for): the
    same recipe fails again, unlike a service that did not answer."""


_APT = "apt-get update && apt-get install -y --no-install-recommends"


def _quoted(items: list[str]) -> str:
    return " ".join(shlex.quote(item) for item in items)


def bake_steps(recipe: Recipe) -> list[tuple[str, str]]:
    """``[(label, shell command)]`` that install ``recipe`` on a booted build volume.

    Raises:
        BuildFailed: The recipe names a base image (Deno boots only its own).
    """
    if recipe.base_image != DEFAULT_BASE_IMAGE:
        raise BuildFailed(
            f"the deno backend cannot bake base image {recipe.base_image!r}: Deno sandboxes "
            f"boot from {BASE_SNAPSHOT}; remove base_image from recipe {recipe.name!r}"
        )
    plan = install_plan(recipe)
    steps = [
        (
            "layout",
            f"mkdir -p {WORKDIR} {PACKAGE_ROOT} && (command -v python >/dev/null || "
            'ln -s "$(command -v python3)" /usr/local/bin/python)',
        ),
        (
            "installer",
            f"command -v uv >/dev/null || ({_APT} python3-pip && "
            "pip3 install --break-system-packages uv)",
        ),
    ]
    if plan.apt_sources:
        steps.append(("apt sources", f"echo {shlex.quote(plan.apt_sources)} > {APT_SOURCES_FILE}"))
    if plan.apt:
        steps.append(("apt", f"{_APT} {_quoted(plan.apt)}"))
    runner = PythonStep("runner", list(RUNNER_REQUIREMENTS), None)
    for step in [runner, *plan.python_by_index]:
        index = f"--index-url {shlex.quote(step.index_url)} " if step.index_url else ""
        steps.append(
            (
                f"python packages ({step.label})",
                f"uv pip install --system --break-system-packages {index}{_quoted(step.packages)}",
            )
        )
    if plan.npm:
        registry = f"--registry {shlex.quote(plan.npm_registry)} " if plan.npm_registry else ""
        steps.append(("npm", f"npm install -g {registry}{_quoted(plan.npm)}"))
    return steps
