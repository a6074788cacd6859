"""The sandbox environments of one server: recipes on disk, their builds, and episode binding.

Built-in templates are TOML files shipped in ``envs/recipes/templates/``; they are only
copied from, never bound or edited. User-made environments are TOML files in
``<state_dir>/envs/recipes/<name>.toml``. Creating from a template writes a copy, so
editing one never changes the other. Creating an environment, or updating one so that
its content hash changes, starts its build.

Binding (``binding.py``): a task whose ``image`` (or the reset option ``environment``)
names an environment runs in that environment's baked image, ``env-<hash>``; while the
image is not ready the reset is refused (``EnvironmentNotReady``); a name that was
deleted falls back to ``"default"`` with a warning. An environment flagged
``workspace_default`` is used for tasks whose image is ``"default"``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from analyst_env.envs.recipes.binding import (
    DEFAULT_IMAGE,
    EnvironmentNotReady,
    Resolved,
    UnknownEnvironment,
    bind,
    serving_image,
)
from analyst_env.envs.recipes.build_db import BuildDB
from analyst_env.envs.recipes.builds import BakeFn, Builder
from analyst_env.envs.recipes.recipe import (
    RESERVED_NAMES,
    Recipe,
    RecipeError,
    build_dir_name,
)

__all__ = [
    "DEFAULT_IMAGE",
    "EnvironmentExists",
    "EnvironmentNotReady",
    "EnvironmentService",
    "Resolved",
    "UnknownEnvironment",
    "load_templates",
]

log = logging.getLogger(__name__)

TEMPLATES_DIR = Path(__file__).with_name("templates")


class EnvironmentExists(ValueError):
    """Creating an environment under a name that is taken."""


def load_templates() -> dict[str, Recipe]:
    """The built-in templates by name."""
    return {r.name: r for r in (Recipe.load(p) for p in sorted(TEMPLATES_DIR.glob("*.toml")))}


def _local_is_built(path: Path) -> bool:
    return (path / "manifest.json").is_file()


def _local_bake(recipe: Recipe, out_dir: Path, **kwargs: Any) -> Any:
    from analyst_env.envs.recipes.local_bake import bake

    return bake(recipe, out_dir, **kwargs)


class EnvironmentService:
    """CRUD, builds and binding for one server's sandbox environments. Thread-safe.

    Args:
        state_dir: The server's state directory; everything lives under ``state_dir/envs``.
        backend: Name of the backend whose images are built (``"local"`` bakes venvs).
        bake: Build function for that backend (default: the local baker).
        is_built: Whether an artifact directory is complete (default: has a manifest).
    """

    def __init__(
        self,
        state_dir: str | Path,
        *,
        backend: str = "local",
        bake: BakeFn | None = None,
        is_built=None,
    ) -> None:
        root = Path(state_dir) / "envs"
        self.recipes_dir = root / "recipes"
        self.recipes_dir.mkdir(parents=True, exist_ok=True)
        self.images_dir = root / "images"
        self.backend = backend
        self.db = BuildDB(root / "builds.sqlite")
        self.builder = Builder(
            self.db,
            backend,
            self.images_dir,
            root / "logs",
            bake or _local_bake,
            is_built or _local_is_built,
        )
        self.templates = load_templates()
        self.forget_image: Callable[[str], None] | None = (
            None  # set by the server: the backend's forget_image
        )
        self._lock = threading.RLock()
        # Resets resolve on every episode: recipes are kept in memory and read from disk again
        # only when the generation in ``builds.sqlite`` moved (every worker of ``serve
        # --workers N`` writes the same files and bumps it); baked specs are immutable per hash.
        self._recipes: dict[str, Recipe] | None = None
        self._served: set[str] | None = None  # the images their new episodes start on
        self._generation = -1
        self._specs: dict[str, Any] = {}

    # ── recipes ─────────────────────────────────────────────────────────────
    def _path(self, name: str) -> Path:
        return self.recipes_dir / f"{name}.toml"

    def _all(self) -> dict[str, Recipe]:
        with self._lock:
            generation = self.db.recipes_generation()
            if self._recipes is None or generation != self._generation:
                recipes = {}
                for path in sorted(self.recipes_dir.glob("*.toml")):
                    try:
                        recipe = Recipe.load(path)
                    except RecipeError as exc:
                        log.warning("skipping unreadable environment %s: %s", path, exc)
                        continue
                    if recipe.name != path.stem:
                        log.warning("skipping %s: it names itself %r", path, recipe.name)
                        continue
                    recipes[recipe.name] = recipe
                served = {image for r in recipes.values() if (image := self._serving(r)[0])}
                before, self._served = self._served, served
                self._recipes, self._generation = recipes, generation
                if before is not None and self.forget_image is not None:
                    # Images a delete, an update or a rebuild (by any worker) left unnamed:
                    # the backend stops serving them (their files stay: content-addressed,
                    # an environment with the same inputs reuses them).
                    for image in before - served:
                        self.forget_image(image)
            return self._recipes

    def list(self) -> list[Recipe]:
        with self._lock:
            return list(self._all().values())

    def get(self, name: str) -> Recipe:
        recipe = self._all().get(name)
        if recipe is None:
            raise UnknownEnvironment(
                f"no sandbox environment named {name!r}; environments: {sorted(self._all())}"
            )
        return recipe.model_copy(deep=True)

    def template(self, name: str) -> Recipe:
        try:
            return self.templates[name]
        except KeyError:
            raise UnknownEnvironment(
                f"no template named {name!r}; templates: {sorted(self.templates)}"
            ) from None

    def create(self, body: dict[str, Any] | None = None, *, template: str | None = None) -> Recipe:
        """Create an environment from ``body`` (recipe fields), or copy ``template`` with ``body``
        applied.

        Raises:
            RecipeError: Invalid fields.
            UnknownEnvironment: No such template.
            EnvironmentExists: The name is taken or reserved.
        """
        body = dict(body or {})
        if template is not None:
            base = self.template(template).model_dump()
            base.update({k: v for k, v in body.items()})
            body = base
        if "name" not in body:
            raise RecipeError("name: a sandbox environment needs a name")
        recipe = Recipe.from_dict(body)
        if recipe.name in RESERVED_NAMES:
            raise EnvironmentExists(
                f"{recipe.name!r} names the server's built-in image; choose another name"
            )
        with self._writing():
            exists = EnvironmentExists(
                f"a sandbox environment named {recipe.name!r} exists; update it instead"
            )
            if recipe.name in self._all():
                raise exists
            try:
                self._save(recipe, exclusive=True)
            except FileExistsError:  # made meanwhile by another worker
                raise exists from None
            self.db.undelete(recipe.name)
        self.builder.start(recipe)
        return recipe

    def update(self, name: str, changes: dict[str, Any]) -> tuple[Recipe, bool]:
        """Apply ``changes`` to environment ``name``; a changed hash starts a rebuild.

        Returns:
            The new recipe and whether a rebuild started.

        Raises:
            UnknownEnvironment, RecipeError (the name cannot change).
        """
        with self._writing():
            old = self.get(name)
            if "name" in changes and changes["name"] != name:
                raise RecipeError("name: an environment cannot be renamed; create a copy instead")
            recipe = Recipe.from_dict({**old.model_dump(), **changes, "name": name})
            self._save(recipe)
        rebuild = (
            recipe.image_hash() != old.image_hash() or self.state(recipe)["status"] == "pending"
        )
        if rebuild:
            self.builder.start(recipe)
        return recipe, rebuild

    def delete(self, name: str) -> None:
        """Remove the environment; tasks bound to it fall back to the default image.

        Its image stays (content-addressed: an environment with the same inputs reuses it).
        """
        with self._writing():
            self.get(name)  # raises for an unknown name
            self._path(name).unlink()
            self.db.mark_deleted(name)
            self._changed()

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """One writer of the recipes at a time, in this process and across the workers of
        ``serve --workers N`` (an exclusive ``flock`` on ``recipes/.lock``).

        A read-modify-write (an update, a delete) then sees every earlier write: the writer
        before it bumped the generation before letting go, so ``_all`` reads the files again.
        Without it an update racing a delete on another worker wrote the deleted recipe back.
        """
        # The file lock first: waiting for another worker's write holds up no reset here.
        with open(self.recipes_dir / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # each open() is its own lock: threads wait too
            with self._lock:
                yield

    def _save(self, recipe: Recipe, *, exclusive: bool = False) -> None:
        """Write ``recipe`` (``exclusive``: only if no file has its name, else FileExistsError)."""
        others = list(self._all().values())
        recipe.dump(self._path(recipe.name), exclusive=exclusive)
        if recipe.workspace_default:
            for other in others:
                if other.workspace_default and other.name != recipe.name:
                    other.model_copy(update={"workspace_default": False}).dump(
                        self._path(other.name)
                    )
        self._changed()

    def _changed(self) -> None:
        """The recipes on disk changed: every process, this one too (another may have written
        meanwhile), reads them again; here at once, so that an image no environment names
        any more stops being served now (``_all``)."""
        self.db.recipes_changed()
        self._all()

    # ── builds ──────────────────────────────────────────────────────────────
    def build(self, name: str, *, force: bool = False) -> dict[str, Any]:
        """Start building ``name`` unless it is ready (or ``force``); its summary."""
        recipe = self.get(name)
        self.builder.start(recipe, force=force)
        return self.summary(recipe)

    def state(self, recipe: Recipe) -> dict[str, Any]:
        return self.builder.state(recipe.image_hash())

    def summary(self, recipe: Recipe) -> dict[str, Any]:
        """The ``GET /envs`` entry: name, description, hash, status, the image new episodes
        start on (``serving``: None until one is built), progress, elapsed_s, error."""
        serving, state = self._serving(recipe)
        return {
            "name": recipe.name,
            "title": recipe.title,
            "description": recipe.description,
            "hash": recipe.image_hash(),
            "status": state["status"],
            "serving": serving,
            "progress": state["progress"],
            "elapsed_s": state["elapsed_s"],
            "error": state["error"],
            "workspace_default": recipe.workspace_default,
        }

    def logs(self, name: str) -> str:
        """The log of the latest build attempt of ``name``'s current image ("" if never built)."""
        path = self.state(self.get(name))["log_path"]
        if not path:
            return ""
        try:
            return Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def wait(self, name: str, timeout_s: float | None = None) -> dict[str, Any]:
        recipe = self.get(name)
        self.builder.wait(recipe.image_hash(), timeout_s)
        return self.summary(recipe)

    # ── binding ─────────────────────────────────────────────────────────────
    def resolve(self, image: str, *, explicit: bool = False) -> Resolved:
        """The image an episode asking for ``image`` runs in.

        Args:
            image: A task's ``image`` or the reset option ``environment``.
            explicit: It came from a reset option: an unknown name is an error
                instead of being passed on to the backend.

        Raises:
            EnvironmentNotReady: The environment exists but its image is not ready.
            UnknownEnvironment: ``explicit`` and no environment has that name.
        """
        if image == DEFAULT_IMAGE:
            default = next((r for r in self.list() if r.workspace_default), None)
            if default is None:
                return Resolved(DEFAULT_IMAGE)
            return self._bound(default)
        recipe = self._all().get(image)
        if recipe is not None:
            return self._bound(recipe)
        if self.db.was_deleted(image):
            return Resolved(
                DEFAULT_IMAGE,
                warning=(
                    f"Sandbox environment {image!r} was deleted; "
                    "this episode runs in the default image."
                ),
            )
        if explicit:
            names = [r.name for r in self.list()]
            raise UnknownEnvironment(
                f"no sandbox environment named {image!r}; environments: {names}"
            )
        return Resolved(image)

    def _bound(self, recipe: Recipe) -> Resolved:
        return bind(recipe, self.state(recipe), self.builder)

    def _serving(self, recipe: Recipe) -> tuple[str | None, dict[str, Any]]:
        state = self.state(recipe)
        return serving_image(recipe, state, self.builder), state

    def local_image(self, image: str):
        """The local backend's ``ImageSpec`` for a baked image name (``env-<hash>``, or
        ``env-<hash>.<revision>``), or None."""
        from analyst_env.envs.kernel.image_specs import IMAGES, ImageSpec

        if image in self._specs:
            return self._specs[image]
        folder = build_dir_name(image)
        manifest_path = self.images_dir / (folder or ".") / "manifest.json"
        if folder is None or not manifest_path.is_file():
            return None
        manifest = json.loads(manifest_path.read_text())
        spec = self._specs[image] = ImageSpec(
            name=image,
            preload=tuple(manifest["preload"]),
            warm_up=IMAGES[DEFAULT_IMAGE].warm_up,
            site_dirs=tuple(manifest["site_dirs"]),
            path_dirs=tuple(manifest["path_dirs"]),
            **manifest.get("sizing", {}),
        )
        return spec

    def close(self) -> None:
        self.builder.close()
        self.db.close()
