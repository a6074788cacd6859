"""The Docker image of a recipe: its install plan as a Dockerfile, and the build context."""

from __future__ import annotations

import io
import shlex
import tarfile

from analyst_env.envs.fork_env import SINGLE_THREADED_ENV
from analyst_env.envs.recipes.install_plan import PythonStep, install_plan
from analyst_env.envs.recipes.recipe import Recipe
from analyst_env.envs.remote.runner_image import (
    APT_SOURCES_FILE,
    PACKAGE_ROOT,
    RUNNER_REQUIREMENTS,
    SANDBOX_UID,
    WORKDIR,
    artifact_tag,
    runner_command,
    runner_sources,
)


def _quoted(items: list[str]) -> str:
    return " ".join(shlex.quote(item) for item in items)


def dockerfile(recipe: Recipe, *, runner_baked: bool = True) -> str:
    """A Dockerfile that bakes ``recipe`` and runs the slot runner as an unprivileged user.

    The build context holds this Dockerfile and ``analyst_env/`` (``runner_sources``).
    pip and uv entries are installed with uv into the system interpreter, each
    list from its own index when the recipe names one. With ``runner_baked=False``
    (a vendor that builds from the Dockerfile text alone, without a build context)
    the image has no copy of the runner's code: ``PACKAGE_ROOT`` is left empty and
    writable by the sandbox user for the backend to fill, and the image idles
    (``sleep infinity``) until the backend starts the runner itself.
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
    owned = WORKDIR if runner_baked else f"{WORKDIR} {PACKAGE_ROOT}"
    command = runner_command(recipe) if runner_baked else ["sleep", "infinity"]
    if runner_baked:
        lines.append(f"COPY analyst_env {PACKAGE_ROOT}/analyst_env")
    lines += [
        f"RUN useradd --uid {SANDBOX_UID} --create-home --shell /bin/sh sandbox "
        f"&& mkdir -p {owned} && chown {SANDBOX_UID}:{SANDBOX_UID} {owned}",
        f"ENV PYTHONPATH={PACKAGE_ROOT} HOME={WORKDIR}",
        f"USER {SANDBOX_UID}",
        f"WORKDIR {WORKDIR}",
        "CMD [" + ", ".join(f'"{arg}"' for arg in command) + "]",
    ]
    return "\n".join(lines) + "\n"


def build_context(recipe: Recipe, *, runner_baked: bool = True) -> io.BytesIO:
    """A tar archive (the Docker build context): the Dockerfile and, when the image bakes the
    runner (see ``dockerfile``), the runner's sources."""
    files = {"Dockerfile": dockerfile(recipe, runner_baked=runner_baked).encode()}
    if runner_baked:
        files.update(runner_sources())
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    buffer.seek(0)
    return buffer
