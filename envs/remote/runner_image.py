"""What every remote image holds for the slot runner, and how the runner is started.

Every remote image holds the recipe's packages plus what the slot runner needs
(IPython, numpy, matplotlib and the default image's data stack) and a copy of
this package's ``envs`` code, which the runner imports. The artifact is named
by the recipe's content hash plus ``RUNNER_REVISION``: a new runner never
reuses an image baked with an older one. The ``default`` image is the recipe
``default_recipe`` describes.
"""

from __future__ import annotations

from pathlib import Path

from analyst_env.envs.kernel.image_specs import IMAGES
from analyst_env.envs.recipes.recipe import Recipe
from analyst_env.envs.sandbox import SandboxError

#: Bumped whenever the runner code baked into images changes incompatibly.
#: 3: ``stop_agent`` and the kernel's ``verify`` request (verification out of the agent's reach).
#: 4: the runner side imports only ``RUNNER_REQUIREMENTS`` (revision 3's frame socket imported
#: ``greenlet`` through the server's event-loop bridge, so no slot of an r3 image started).
RUNNER_REVISION = 4

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

#: Where an image writes a recipe's ``apt_sources`` line.
APT_SOURCES_FILE = "/etc/apt/sources.list.d/analyst-env.list"

#: Where images keep the package, the sandbox user and the working directory.
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
    """``<content hash>-r<runner revision>``: the tag of the recipe's image on every remote
    backend."""
    return f"{recipe.content_hash(include_sizing=include_sizing)}-r{RUNNER_REVISION}"


def image_reference(recipe: Recipe) -> str:
    """``analyst-env:<artifact tag>``: the name (repository and tag) of the recipe's runner
    image where an image engine or registry holds it (Docker, Modal, OpenSandbox, Azure's
    registry)."""
    return f"analyst-env:{artifact_tag(recipe)}"


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
    """``{path under PACKAGE_ROOT: bytes}`` of the code the runner imports
    (``analyst_env/envs``)."""
    files = {"analyst_env/__init__.py": (_PACKAGE_DIR / "__init__.py").read_bytes()}
    for path in sorted((_PACKAGE_DIR / "envs").rglob("*.py")):
        if "__pycache__" not in path.parts:
            files["analyst_env/" + path.relative_to(_PACKAGE_DIR).as_posix()] = path.read_bytes()
    return files
