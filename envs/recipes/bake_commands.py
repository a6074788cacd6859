"""What every step of a local bake shares: its error, its callbacks, and running a host command.

A step that fails raises :class:`BakeError` with what the user needs to fix the recipe;
steps report to the build log (``Log``) and the build's progress (``Progress``). The
installers (:mod:`analyst_env.envs.recipes.bake_install`) run ``uv`` and ``npm`` through
:func:`run`, which logs their output, keeps to the build's deadline and turns a failure
into a ``BakeError`` carrying the command's last output lines.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable


class BakeError(RuntimeError):
    """A build step failed; the message is what the user needs to fix the recipe."""


Log = Callable[[str], None]
Progress = Callable[[float], None]


def run(
    argv: list[str], log: Log, deadline: float, *, echo: bool = True, cwd: str | None = None
) -> str:
    """Run one build command, logging its output; return stdout.

    Raises:
        BakeError: It exited non-zero (the message is its last output lines) or ran past the
            deadline.
    """
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise BakeError("the build ran out of time")
    log("$ " + " ".join([os.path.basename(argv[0]), *argv[1:]]))
    env = {**os.environ, "NO_COLOR": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        result = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=remaining,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise BakeError(
            f"{os.path.basename(argv[0])} did not finish before the build timeout"
        ) from None
    except OSError as exc:
        raise BakeError(f"could not run {argv[0]}: {exc}") from None
    for line in result.stderr.splitlines():
        log(line)
    if echo:
        for line in result.stdout.splitlines():
            log(line)
    if result.returncode != 0:
        tail = "\n".join((result.stderr.strip() or result.stdout.strip()).splitlines()[-12:])
        raise BakeError(f"{os.path.basename(argv[0])} failed (exit {result.returncode}):\n{tail}")
    return result.stdout
