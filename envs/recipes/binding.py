"""Which image an episode of a sandbox environment starts on, and the refusal while none is.

A task whose ``image`` (or the reset option ``environment``) names an environment runs
in that environment's baked image, ``env-<hash>.<revision>``: the revision of its last
build once ready; while a forced rebuild runs, or after it failed, the revision before
it, with a warning for the reset's metadata. An environment never built (or whose only
build failed) has no image to run: ``EnvironmentNotReady``, with the build status, so
the reset is refused instead of running on something else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from analyst_env.envs.recipes.builds import Builder
from analyst_env.envs.recipes.recipe import Recipe, image_name

DEFAULT_IMAGE = "default"


class EnvironmentNotReady(RuntimeError):
    """An episode was bound to an environment whose image is not built (yet, or at all)."""

    def __init__(self, status: str) -> None:
        super().__init__(f"Sandbox environment image is not ready (build status: {status})")
        self.status = status


class UnknownEnvironment(KeyError):
    """No environment (or template) has that name."""

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class Resolved:
    """Which image an episode runs in, and a warning for its reset metadata (or None)."""

    image: str
    environment: str | None = None
    warning: str | None = None


def serving_image(recipe: Recipe, state: dict[str, Any], builder: Builder) -> str | None:
    """The image new episodes of ``recipe`` start on, given its build ``state`` (None: none
    is built)."""
    digest, revision = recipe.image_hash(), state["revision"]
    if state["status"] == "ready":
        return image_name(digest, revision)
    if builder.built(digest, revision - 1):
        return image_name(digest, revision - 1)
    return None


def bind(recipe: Recipe, state: dict[str, Any], builder: Builder) -> Resolved:
    """Where an episode of ``recipe`` runs.

    Raises:
        EnvironmentNotReady: No build of it is there to run on.
    """
    image = serving_image(recipe, state, builder)
    if image is None:
        raise EnvironmentNotReady(state["status"])
    warning = None
    if state["status"] != "ready":
        warning = (
            f"Sandbox environment {recipe.name!r} is being rebuilt"
            if state["status"] == "building"
            else f"The rebuild of sandbox environment {recipe.name!r} failed"
        ) + "; this episode runs on its previous build."
    return Resolved(image, environment=recipe.name, warning=warning)
