"""The slot runner: a warm fork server for one slot of a remote backend, over stdin/stdout.

Docker and Modal start ``python -m analyst_env.envs.remote.runner`` once per
slot (a long-lived container or sandbox) and talk to it through the process's
stdin and stdout with length-prefixed JSON frames (``envs.frames``). Starting a
container per episode costs 1.2-2.5 s; forking a kernel from a runner that has
already imported the image's modules costs about 10 ms, so the runner is the
zygote of its slot and each episode is one forked kernel.

The forked kernel is the local backend's episode kernel: the same request
handling (``envs.kernel.child.serve_episode``: cell, shell, put, get, ping) and
the same IPython shell, so a cell gives the same result on every backend. The
runner relays those requests to the current kernel and answers its own:

* runner → server once warm: ``{"op": "ready", "pid", "python", "protocol", "missing"}``
  (``missing``: preload modules that failed to import)
* ``{"op": "start", "files": {name: base64}, "seed", "env"}`` → ``{"workdir", "pid"}``:
  ends the previous episode, empties the working directory, writes the task
  files, forks a kernel and applies the seed and environment. Task files travel
  as bytes here, where the local backend passes file descriptors.
* ``{"op": "restart"}`` → ``{"pid"}``: a fresh kernel in the same working
  directory (files kept), same seed and environment.
* ``{"op": "stop_agent"}`` → ``{"pid"}``: before verification, kill every process the
  runner did not start itself (its descendants: kernel, escapees, standby) and fork a
  fresh kernel (files kept); verify commands then go to it as ``verify`` requests.
* ``{"op": "end"}`` → ``{}``: kill the episode's processes, empty the directory.
* ``{"op": "interrupt"}`` (no reply): SIGINT to the kernel's running cell.
* ``cell``, ``shell``, ``put``, ``get``, ``ping``: relayed to the kernel. If the
  kernel dies before answering, the reply is ``{"kernel_died": message}``.

Every request may carry an ``"id"``, echoed in its reply, so a client never
takes a late reply (a cell answering after its kernel was given up on) for
the answer to a later request.

Failures of a runner request come back as ``{"failure": {"type", "message"}}``.
The runner exits (killing its episode) when its stdin closes. Linux only.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from typing import Any

# Importing the ``analyst_env`` package may already import numpy, so the runner
# re-executes itself with these when it was started without (``_single_threaded``).
from analyst_env.envs.fork_env import SINGLE_THREADED_ENV, freeze_for_fork
from analyst_env.envs.frames import encode
from analyst_env.envs.remote.slot_server import Runner

PROTOCOL = 1
DEFAULT_WORKDIR = "/work"


def _prepare(preload: list[str]) -> tuple[Any, list[str], str]:
    """Import the preload modules, build and warm the shell, freeze the heap for forking.

    Returns:
        The shell, the modules that failed to import, and the warm-up code
        (run again in each standby kernel).

    Raises:
        RuntimeError: Something left a thread running; forking would be unsafe.
    """
    import matplotlib

    from analyst_env.envs.kernel.image_specs import IMAGES, MPL_BACKEND, apply_mpl_rc
    from analyst_env.envs.kernel.ipyshell import build_shell, warm_cell_paths

    matplotlib.use(MPL_BACKEND)
    apply_mpl_rc()
    missing = []
    for module in preload:
        try:
            importlib.import_module(module)
        except Exception as exc:
            print(f"runner: preload of {module!r} failed: {exc}", file=sys.stderr)
            missing.append(module)
    shell = build_shell()
    standby_warm_up = IMAGES["default"].standby_warm_up  # cheap on purpose, as for local standbys
    try:
        exec(compile(IMAGES["default"].warm_up, "<warm-up>", "exec"), {})
    except ImportError:
        standby_warm_up = "pass"  # an image without the default stack warms up less
    warm_cell_paths(shell)
    # Kernels inherit the tools' helpers with the heap, as on the local backend.
    from analyst_env.envs.kernel_helpers import HELPER_SOURCE

    shell.run_cell(HELPER_SOURCE, store_history=False, silent=True)
    freeze_for_fork("runner")
    return shell, missing, standby_warm_up


def main(argv: list[str] | None = None) -> None:
    """Entry point: ``python -m analyst_env.envs.remote.runner [--workdir DIR] [--preload a,b]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default=DEFAULT_WORKDIR)
    parser.add_argument(
        "--preload", default=None, help="comma-separated modules (default: the default image's)"
    )
    parser.add_argument("--output-limit-bytes", type=int, default=2 * 1024 * 1024)
    args = parser.parse_args(argv)
    # The protocol owns the original stdin/stdout; stray prints (e.g. from a
    # preloaded module) go to stderr instead of corrupting it.
    in_fd, out_fd = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from analyst_env.envs.kernel import procctl
    from analyst_env.envs.kernel.image_specs import IMAGES

    preload = (
        IMAGES["default"].preload
        if args.preload is None
        else [m for m in args.preload.split(",") if m]
    )
    os.makedirs(args.workdir, exist_ok=True)
    tmp = os.environ.get("TMPDIR", "/tmp")
    os.environ.setdefault("MPLCONFIGDIR", tmp)
    try:
        shell, missing, warm_up = _prepare(list(preload))
    except Exception as exc:
        os.write(out_fd, encode({"op": "failed", "message": f"{type(exc).__name__}: {exc}"}))
        raise SystemExit(1) from None
    procctl.set_child_subreaper()
    runner = Runner(
        in_fd, out_fd, shell, os.path.realpath(args.workdir), args.output_limit_bytes, warm_up
    )
    runner.ensure_standby()
    runner.send(
        {
            "op": "ready",
            "pid": os.getpid(),
            "python": sys.version.split()[0],
            "protocol": PROTOCOL,
            "missing": missing,
        }
    )
    runner.serve()


def _single_threaded() -> None:
    """Re-execute this runner with ``SINGLE_THREADED_ENV`` if any of it is missing."""
    if any(os.environ.get(k) != v for k, v in SINGLE_THREADED_ENV.items()):
        env = {**os.environ, **SINGLE_THREADED_ENV}
        argv = [sys.executable, "-u", "-m", "analyst_env.envs.remote.runner", *sys.argv[1:]]
        os.execve(sys.executable, argv, env)


if __name__ == "__main__":
    _single_threaded()
    main()
