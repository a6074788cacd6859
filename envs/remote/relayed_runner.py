"""What every vendor that starts the slot runner behind ``line_relay`` shares.

Daytona and Runloop give a long-lived process only text streams, Azure none at all
(``spool_relay``), and all three receive the runner's code per slot as one archive
(their baked images hold the recipe's packages, not our code). The archive, the shell
commands that unpack it and start the relayed runner, and the order of a slot's start
(upload, unpack, start the relay, wait for the runner; dispose of the slot if any step
fails) are here once, so the backends cannot drift apart: each gives only its vendor's
calls. Deno receives the same archive and starts the runner, unrelayed, on a FIFO.
"""

from __future__ import annotations

import io
import shlex
import tarfile
from collections.abc import Callable
from dataclasses import dataclass

from analyst_env.envs.fork_env import SINGLE_THREADED_ENV
from analyst_env.envs.recipes.recipe import Recipe
from analyst_env.envs.remote import runner_image
from analyst_env.envs.remote.channel import QueueChannel
from analyst_env.envs.remote.runner_link import RunnerClient
from analyst_env.envs.sandbox import SandboxError

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


def _runner_env() -> list[str]:
    env = {**SINGLE_THREADED_ENV, "PYTHONPATH": runner_image.PACKAGE_ROOT, "MPLCONFIGDIR": "/tmp"}
    return ["env", *(f"{key}={value}" for key, value in env.items())]


def relay_command(
    recipe: Recipe, relay: tuple[str, ...] = ("analyst_env.envs.remote.line_relay",)
) -> str:
    """The shell command that starts the runner behind ``relay`` (a module and its arguments
    before the runner's argv): ``line_relay``, or ``spool_relay serve DIR --`` on Azure."""
    argv = [
        *_runner_env(),
        "python",
        "-u",
        "-m",
        *relay,
        *runner_image.runner_command(recipe),
    ]
    return f"cd {runner_image.WORKDIR} && {shlex.join(argv)}"


def fifo_command(recipe: Recipe, fifo: str) -> str:
    """The shell command that makes ``fifo`` and starts the runner reading its requests there
    (opened read-write, so it never sees end of file between writers; Deno's ``deno_link``)."""
    argv = [*_runner_env(), *runner_image.runner_command(recipe)]
    path = shlex.quote(fifo)
    return (
        f"rm -f {path} && mkfifo -m 600 {path} && cd {runner_image.WORKDIR} && "
        f"exec {shlex.join(argv)} 0<> {path}"
    )


@dataclass(frozen=True)
class SlotCalls:
    """One new slot's vendor calls, as ``start_relayed_runner`` needs them.

    Attributes:
        label: Names the slot in errors and logs (``"daytona sandbox <id>"``).
        upload: Writes bytes to a path in the slot.
        run: Runs a shell command to completion; its exit code and output.
        relay: Starts a shell command as the long-lived relay; the channel to it.
        dispose: Deletes the slot (called when its start fails).
        vendor_error: The SDK's base exception (or exceptions), turned into ``SandboxError``.
    """

    label: str
    upload: Callable[[bytes, str], None]
    run: Callable[[str], tuple[int, str]]
    relay: Callable[[str], QueueChannel]
    dispose: Callable[[], None]
    vendor_error: type[BaseException] | tuple[type[BaseException], ...]


def start_relayed_runner(
    calls: SlotCalls, recipe: Recipe, bundle: bytes, boot_timeout_s: float
) -> RunnerClient:
    """Upload and unpack the runner's ``bundle`` in a new slot, start it behind ``line_relay``
    and wait until it is ready; on any failure the slot is disposed of.

    Raises:
        SandboxError: A step failed (the vendor's error, the unpack's output, or the runner's).
    """
    try:
        calls.upload(bundle, BUNDLE_PATH)
        code, output = calls.run(unpack_command())
        if code != 0:
            raise SandboxError(f"unpacking the runner failed: {output[-500:]}")
        client = RunnerClient(calls.relay(relay_command(recipe)), calls.label)
        client.wait_ready(boot_timeout_s)
    except BaseException as exc:
        try:
            calls.dispose()
        except Exception:
            pass
        if isinstance(exc, calls.vendor_error):
            raise SandboxError(f"{calls.label} could not start: {exc}") from exc
        raise
    return client
