"""What every vendor that starts the slot runner behind ``line_relay`` shares.

Daytona and Runloop give a long-lived process only text streams, Azure none at all
(``spool_relay``), and all three receive the runner's code per slot as one archive
(their baked images hold the recipe's packages, not our code). The archive and the
shell command that starts the relayed runner are built here once, so the backends
cannot drift apart.
"""

from __future__ import annotations

import io
import shlex
import tarfile

from analyst_env.envs.fork_env import SINGLE_THREADED_ENV
from analyst_env.envs.recipes.recipe import Recipe
from analyst_env.envs.remote import runner_image

#: Where a slot receives the runner's code before it starts.
BUNDLE_PATH = f"{runner_image.PACKAGE_ROOT}/runner.tar.gz"


def runner_bundle() -> bytes:
    """A gzipped tar of the runner's code, unpacked under ``PACKAGE_ROOT`` in each slot."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in runner_image.runner_sources().items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def unpack_command() -> str:
    """The shell command that unpacks the uploaded bundle and removes it."""
    root, bundle = runner_image.PACKAGE_ROOT, shlex.quote(BUNDLE_PATH)
    return f"mkdir -p {runner_image.WORKDIR} && tar -xzf {bundle} -C {root} && rm -f {bundle}"


def relay_command(
    recipe: Recipe, relay: tuple[str, ...] = ("analyst_env.envs.remote.line_relay",)
) -> str:
    """The shell command that starts the runner behind ``relay`` (a module and its arguments
    before the runner's argv): ``line_relay``, or ``spool_relay serve DIR --`` on Azure."""
    env = {**SINGLE_THREADED_ENV, "PYTHONPATH": runner_image.PACKAGE_ROOT, "MPLCONFIGDIR": "/tmp"}
    argv = [
        "env",
        *(f"{key}={value}" for key, value in env.items()),
        "python",
        "-u",
        "-m",
        *relay,
        *runner_image.runner_command(recipe),
    ]
    return f"cd {runner_image.WORKDIR} && {shlex.join(argv)}"
