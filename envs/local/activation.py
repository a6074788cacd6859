"""Turning a forked kernel into an episode's: its task files, seed and environment.

A standby kernel is forked and warmed before anyone asks for it; what makes it
one episode's is sent at ``start()``: the task files as read-only descriptors
(the kernel copies them into its own tmpfs, so a path on the host is never
shown to it), the seed and the environment variables. Descriptors go
``FDS_PER_MESSAGE`` to a message, below the kernel's ``SCM_RIGHTS`` limit.
"""

from __future__ import annotations

import os
import time

from analyst_env.envs.local.kernel import KernelHandle
from analyst_env.envs.sandbox import SandboxError
from analyst_env.envs.task_files import check_task_file_name

ACTIVATE_TIMEOUT_S = 60.0
FDS_PER_MESSAGE = 250


def open_task_files(files: dict[str, str]) -> list[int]:
    """Open every task file read-only; the kernel copies from these descriptors.

    Raises:
        SandboxError: A file name is not a plain task file name, or a file cannot be opened.
    """
    fds: list[int] = []
    try:
        for name, source in files.items():
            try:
                check_task_file_name(name)
            except ValueError as exc:
                raise SandboxError(str(exc)) from None
            fds.append(os.open(source, os.O_RDONLY | os.O_CLOEXEC))
    except OSError as exc:
        for fd in fds:
            os.close(fd)
        raise SandboxError(f"could not open task file {exc.filename!r}: {exc.strerror}") from exc
    except SandboxError:
        for fd in fds:
            os.close(fd)
        raise
    return fds


def activate(
    kernel: KernelHandle,
    files: dict[str, str],
    fds: list[int],
    seed: int | None,
    env: dict[str, str],
) -> None:
    """Give ``kernel`` its task files (``fds``, opened from ``files``), seed and environment.

    Raises:
        SandboxError: The kernel did not answer in time or could not stage a file.
        ConnectionClosed: The kernel is dead (e.g. its zygote was killed).
    """
    names = list(files)
    for start in range(0, max(len(names), 1), FDS_PER_MESSAGE):
        chunk = slice(start, start + FDS_PER_MESSAGE)
        last = start + FDS_PER_MESSAGE >= len(names)
        request = {
            "op": "activate",
            "names": names[chunk],
            "seed": seed,
            # env and seeds are applied with every chunk; the last one wins
            "env": env if last else {},
        }
        kernel.conn.send(request, fds[chunk])
        reply = kernel.conn.recv(time.monotonic() + ACTIVATE_TIMEOUT_S)
        if reply is None:
            raise SandboxError("the kernel did not accept the task files in time")
        if "failure" in reply:
            raise SandboxError(f"could not stage the task files: {reply['failure']['message']}")


def request(kernel: KernelHandle, message: dict, timeout_s: float) -> dict:
    """Send one request to a kernel and return its reply.

    Raises:
        SandboxError: No reply in time, or the kernel reported a failure.
    """
    kernel.conn.send(message)
    reply = kernel.conn.recv(time.monotonic() + timeout_s)
    if reply is None or "failure" in reply:
        raise SandboxError(f"kernel request {message['op']!r} failed: {reply}")
    return reply
