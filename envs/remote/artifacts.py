"""Where a remote backend records what it built, and how an image name finds its recipe.

The build lifecycle (``envs.recipes``) keeps one directory per content hash;
for a remote backend it holds only a manifest: which backend built which
artifact from which recipe, so episodes bound to ``env-<hash>`` find the
recipe again after a restart.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from analyst_env.envs.recipes.recipe import Recipe, build_dir_name
from analyst_env.envs.remote.runner_image import default_recipe
from analyst_env.envs.sandbox import SandboxBaker, SandboxError

if TYPE_CHECKING:
    from analyst_env.envs.backends import BackendSettings

MANIFEST = "manifest.json"


def write_manifest(out_dir: Path, recipe: Recipe, *, backend: str, artifact: str) -> None:
    """Record a finished remote build in the environment's image directory."""
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest = {"backend": backend, "artifact": artifact, "recipe": recipe.model_dump()}
    tmp = out_dir / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2))
    tmp.replace(out_dir / MANIFEST)


def built_by(out_dir: Path, backend: str) -> bool:
    """Whether ``out_dir`` holds a finished build of ``backend``."""
    try:
        return json.loads((out_dir / MANIFEST).read_text()).get("backend") == backend
    except (OSError, ValueError):
        return False


class BakesItself(SandboxBaker):
    """Base of a backend that is its own ``SandboxBaker`` (``BakesArtifacts``): its ``bake``
    records each finished build with ``write_manifest``, so a directory counts as built
    when its manifest names this backend."""

    name: str

    def is_built(self, out_dir: Path) -> bool:
        """Whether ``out_dir``'s manifest records an artifact of this backend."""
        return built_by(out_dir, self.name)

    def baker(self) -> SandboxBaker:
        """Itself: the backend builds its own artifact for each recipe."""
        return self


def recipe_resolver(images_dir: Path | None, backend: str):
    """Image name -> recipe: ``default``, or ``env-<hash>[.<revision>]`` from a manifest this
    backend wrote."""

    def resolve(image: str) -> Recipe:
        if image == "default":
            return default_recipe()
        folder = build_dir_name(image)
        if images_dir is not None and folder is not None:
            try:
                manifest = json.loads((images_dir / folder / MANIFEST).read_text())
            except (OSError, ValueError):
                manifest = {}
            if manifest.get("backend") == backend:
                return Recipe.model_validate(manifest["recipe"])
        raise SandboxError(
            f"unknown image {image!r} on the {backend} backend: it is not 'default' and no sandbox "
            "environment built for this backend has that image"
        )

    return resolve


def settings_resolver(settings: BackendSettings, backend: str):
    """``recipe_resolver`` over the builds recorded under ``<state_dir>/envs/images``."""
    return recipe_resolver(Path(settings.state_dir) / "envs" / "images", backend)
