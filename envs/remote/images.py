"""From a recipe to what a remote backend builds: artifact names, a Dockerfile, the runner's files.

Every remote image holds the recipe's packages plus what the slot runner needs
(IPython, numpy, matplotlib and the default image's data stack) and a copy of
this package's ``envs`` code, which the runner imports. The artifact is named
by the recipe's content hash plus ``RUNNER_REVISION``: a new runner never
reuses an image baked with an older one.
"""

from __future__ import annotations

import io
import shlex
import tarfile
from pathlib import Path
from typing import TYPE_CHECKING

from analyst_env.envs.fork_env import SINGLE_THREADED_ENV
from analyst_env.envs.local.images import IMAGES
from analyst_env.envs.recipes.install_plan import PythonStep, install_plan
from analyst_env.envs.recipes.recipe import IMAGE_PREFIX, Recipe
from analyst_env.envs.sandbox import SandboxError

if TYPE_CHECKING:
    from analyst_env.envs.backends import BackendSettings

#: Bumped whenever the runner code baked into images changes incompatibly.
RUNNER_REVISION = 2

#: What the runner itself imports, with the server's own version floors.
RUNNER_REQUIREMENTS = (
    "ipython>=8.20",
    "numpy>=1.26",
    "pandas>=2.2",
    "duckdb>=1.1",
    "openpyxl>=3.1",
    "matplotlib>=3.8",
    "pydantic>=2.7",  # the sandbox interface's result types
)

#: Where images keep the package, the sandbox user and the working directory.
APT_SOURCES_FILE = "/etc/apt/sources.list.d/analyst-env.list"
"""Where an image writes a recipe's ``apt_sources`` line."""
PACKAGE_ROOT = "/opt/analyst_env"
SANDBOX_UID = 1000
WORKDIR = "/work"

_PACKAGE_DIR = Path(__file__).resolve().parents[2]


def default_recipe() -> Recipe:
    """The recipe of the built-in ``default`` image: the runner's stack, the default preload."""
    return Recipe(
        name="default",
        description="The server's standard data-analysis image",
        preload=list(IMAGES["default"].preload),
    )


def resolve_default(image: str) -> Recipe:
    """Recipe lookup for servers without user environments: only ``default`` exists.

    Raises:
        SandboxError: ``image`` is not ``default``.
    """
    if image == "default":
        return default_recipe()
    raise SandboxError(f"unknown image {image!r}; this server has only 'default'")


def preload_of(recipe: Recipe) -> list[str]:
    """Modules the runner imports before forking: the recipe's, or the default image's."""
    return list(recipe.preload) or list(IMAGES["default"].preload)


def artifact_tag(recipe: Recipe, *, include_sizing: bool = False) -> str:
    """``<content hash>-r<runner revision>``: the tag of the recipe's image on every remote backend."""
    return f"{recipe.content_hash(include_sizing=include_sizing)}-r{RUNNER_REVISION}"


def runner_command(recipe: Recipe, workdir: str = WORKDIR) -> list[str]:
    """The argv that starts the slot runner inside an image built from ``recipe``."""
    return [
        "python",
        "-u",
        "-m",
        "analyst_env.envs.remote.runner",
        "--workdir",
        workdir,
        "--preload",
        ",".join(preload_of(recipe)),
    ]


def runner_sources() -> dict[str, bytes]:
    """``{path under PACKAGE_ROOT: bytes}`` of the code the runner imports (``analyst_env/envs``)."""
    files = {"analyst_env/__init__.py": (_PACKAGE_DIR / "__init__.py").read_bytes()}
    for path in sorted((_PACKAGE_DIR / "envs").rglob("*.py")):
        if "__pycache__" not in path.parts:
            files["analyst_env/" + path.relative_to(_PACKAGE_DIR).as_posix()] = path.read_bytes()
    return files


def _quoted(items: list[str]) -> str:
    return " ".join(shlex.quote(item) for item in items)


def dockerfile(recipe: Recipe) -> str:
    """A Dockerfile that bakes ``recipe`` and runs the slot runner as an unprivileged user.

    The build context holds this Dockerfile and ``analyst_env/`` (``runner_sources``).
    pip and uv entries are installed with uv into the system interpreter, each
    list from its own index when the recipe names one.
    """
    plan = install_plan(recipe)
    pinned = " ".join(f"{k}={v}" for k, v in SINGLE_THREADED_ENV.items())
    lines = [
        f"# analyst_env sandbox image for recipe {recipe.name!r} ({artifact_tag(recipe)})",
        f"FROM {recipe.base_image}",
        f"ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 {pinned} MPLCONFIGDIR=/tmp "
        "DEBIAN_FRONTEND=noninteractive",
    ]
    if plan.apt_sources:
        lines.append(f"RUN echo {shlex.quote(plan.apt_sources)} > {APT_SOURCES_FILE}")
    if plan.apt:
        lines.append(
            "RUN apt-get update && apt-get install -y --no-install-recommends "
            f"{_quoted(plan.apt)} && rm -rf /var/lib/apt/lists/*"
        )
    lines.append("RUN python -m pip install --no-cache-dir uv")
    runner = PythonStep("runner", list(RUNNER_REQUIREMENTS), None)
    for step in [runner, *plan.python_by_index]:
        index_opt = f"--index-url {shlex.quote(step.index_url)} " if step.index_url else ""
        lines.append(f"RUN uv pip install --system --no-cache {index_opt}{_quoted(step.packages)}")
    if plan.npm:
        registry = f"--registry {shlex.quote(plan.npm_registry)} " if plan.npm_registry else ""
        lines.append(f"RUN npm install -g {registry}{_quoted(plan.npm)} && npm cache clean --force")
    lines += [
        f"COPY analyst_env {PACKAGE_ROOT}/analyst_env",
        f"RUN useradd --uid {SANDBOX_UID} --create-home --shell /bin/sh sandbox "
        f"&& mkdir -p {WORKDIR} && chown {SANDBOX_UID}:{SANDBOX_UID} {WORKDIR}",
        f"ENV PYTHONPATH={PACKAGE_ROOT} HOME={WORKDIR}",
        f"USER {SANDBOX_UID}",
        f"WORKDIR {WORKDIR}",
        "CMD [" + ", ".join(f'"{arg}"' for arg in runner_command(recipe)) + "]",
    ]
    return "\n".join(lines) + "\n"


def build_context(recipe: Recipe) -> io.BytesIO:
    """A tar archive (the Docker build context): the Dockerfile and the runner's sources."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in {"Dockerfile": dockerfile(recipe).encode(), **runner_sources()}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    buffer.seek(0)
    return buffer


# ── baked images of sandbox environments ───────────────────────────────────────────
MANIFEST = "manifest.json"


def write_manifest(out_dir: Path, recipe: Recipe, *, backend: str, artifact: str) -> None:
    """Record a finished remote build in the environment's image directory.

    The build lifecycle (``envs.recipes``) keeps one directory per content hash;
    for a remote backend it holds only this manifest: which backend built which
    artifact from which recipe, so episodes bound to ``env-<hash>`` can find
    the recipe again after a restart.
    """
    import json

    out_dir.mkdir(parents=True, exist_ok=True)
    manifest = {"backend": backend, "artifact": artifact, "recipe": recipe.model_dump()}
    tmp = out_dir / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2))
    tmp.replace(out_dir / MANIFEST)


def built_by(out_dir: Path, backend: str) -> bool:
    """Whether ``out_dir`` holds a finished build of ``backend``."""
    import json

    try:
        return json.loads((out_dir / MANIFEST).read_text()).get("backend") == backend
    except (OSError, ValueError):
        return False


def recipe_resolver(images_dir: Path | None, backend: str):
    """Image name -> recipe: ``default``, or ``env-<hash>`` from a manifest this backend wrote."""
    import json

    def resolve(image: str) -> Recipe:
        if image == "default":
            return default_recipe()
        digest = image[len(IMAGE_PREFIX):] if image.startswith(IMAGE_PREFIX) else ""
        if images_dir is not None and digest.isalnum():
            try:
                manifest = json.loads((images_dir / digest / MANIFEST).read_text())
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
