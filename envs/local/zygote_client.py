"""The server side of a zygote: start it, ask it for kernels, stop it.

The zygote runs as ``python -m analyst_env.envs.local.zygote`` in its own
session (a Ctrl-C aimed at the server does not reach it), connected by a
``SOCK_SEQPACKET`` socketpair. Fork requests on one zygote are serialized by
the caller; one request takes about 10 ms.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from typing import Any

from analyst_env.envs import loop_bridge
from analyst_env.envs.fork_env import SINGLE_THREADED_ENV
from analyst_env.envs.frame_socket import FrameConnection
from analyst_env.envs.kernel import procctl
from analyst_env.envs.kernel.image_specs import IMAGES, ImageSpec
from analyst_env.envs.local.kernel import KernelHandle
from analyst_env.envs.sandbox import SandboxError

_MAX_REPLY_BYTES = 1 << 16
# Importing the ``analyst_env`` package may import numpy before the zygote module runs,
# so the zygote starts with ``SINGLE_THREADED_ENV`` in its environment; kernels inherit it.

# The only variables of the server's environment a zygote (and so every kernel) inherits:
# locale, time zone, how to find programs and modules, and CPU quirks numerical
# libraries need. Tokens, API keys and cloud credentials the server was started with
# never reach an episode.
KERNEL_ENV_ALLOWED = (
    "PATH",
    "PYTHONPATH",
    "LANG",
    "LANGUAGE",
    "TZ",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
)
KERNEL_ENV_ALLOWED_PREFIXES = ("LC_",)


def kernel_environment(server_env: dict[str, str]) -> dict[str, str]:
    """The allow-listed part of ``server_env`` that a zygote starts with (see
    ``KERNEL_ENV_ALLOWED``)."""
    return {
        name: value
        for name, value in server_env.items()
        if name in KERNEL_ENV_ALLOWED or name.startswith(KERNEL_ENV_ALLOWED_PREFIXES)
    }


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _baked_launch(spec: ImageSpec) -> tuple[list[str], dict[str, str]]:
    """Arguments and environment that start a zygote with a baked image's packages first.

    ``-c`` code adds the image's package directories (with their ``.pth`` files) in
    front of ``sys.path`` before anything is imported, then runs the zygote module;
    ``PYTHONPATH`` and ``PATH`` carry them to the kernels' subprocesses too.
    """
    run = (
        "import runpy; runpy.run_module('analyst_env.envs.local.zygote', run_name='__main__', "
        "alter_sys=True)"
    )
    code = (
        "import site, sys\n"
        f"_before = list(sys.path)\n"
        f"for _d in {list(spec.site_dirs)!r}:\n"
        "    site.addsitedir(_d)\n"
        "sys.path[:] = [p for p in sys.path if p not in _before] + _before\n"
        f"{run}\n"
    )
    env = {}
    if spec.site_dirs:
        env["PYTHONPATH"] = os.pathsep.join(
            [*spec.site_dirs, *filter(None, [os.environ.get("PYTHONPATH")])]
        )
    if spec.path_dirs:
        env["PATH"] = os.pathsep.join([*spec.path_dirs, os.environ.get("PATH", os.defpath)])
    return ["-c", code, "--image-spec", spec.to_json()], env


class ZygoteDied(SandboxError):
    """The zygote is gone (crashed or killed); start a new one."""


class ZygoteProcess:
    """A running, warm zygote for one image.

    Starting one blocks until the zygote has imported and warmed its image
    (about a second).

    Args:
        image: Name of the image (a key of ``images.IMAGES``, or of a baked image).
        spec: The image's spec when it is not a built-in one (a baked recipe):
            its package directories go first on the zygote's path.
        mode: Isolation mode (see ``isolation``).
        host_root: The backend's root directory.
        hidden: Host directories kernels must not read even where the view
            exposes their parent (the task cache, the server's state).
        boot_timeout_s: How long to wait for the zygote to become ready.
        request_timeout_s: How long to wait for the reply to a fork request.

    Raises:
        ZygoteDied: The zygote exited or did not become ready in time.
    """

    def __init__(
        self,
        image: str,
        *,
        spec: ImageSpec | None = None,
        mode: str = "none",
        host_root: str = "/tmp",
        hidden: tuple[str, ...] = (),
        boot_timeout_s: float = 120.0,
        request_timeout_s: float = 30.0,
    ) -> None:
        self.image = image
        self._request_timeout_s = request_timeout_s
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env: dict[str, str]
        launch, env = ["-m", "analyst_env.envs.local.zygote"], {}
        if spec is not None and image not in IMAGES:
            launch, env = _baked_launch(spec)
        with theirs:
            self._proc = subprocess.Popen(
                [
                    sys.executable,
                    "-P",  # no current directory on sys.path: it must not decide what kernels see
                    *launch,
                    "--image",
                    image,
                    "--control-fd",
                    str(theirs.fileno()),
                    "--mode",
                    mode,
                    "--host-root",
                    host_root,
                    "--package-dir",
                    _PACKAGE_DIR,
                    *(arg for path in hidden for arg in ("--hide", path)),
                ],
                pass_fds=[theirs.fileno()],
                env={**kernel_environment(dict(os.environ)), **SINGLE_THREADED_ENV, **env},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                start_new_session=True,
                cwd="/",
            )
        self._control = ours
        ready, _ = self._receive(boot_timeout_s)
        if ready.get("op") != "ready":
            self.stop()
            raise ZygoteDied(f"zygote for image {image!r} sent {ready!r} instead of 'ready'")
        self.pid: int = ready["pid"]
        self.exposed: list[str] = ready.get("exposed", [])

    @property
    def host_pid(self) -> int:
        """The zygote's process id as the server sees it (``pid`` is its own view)."""
        return self._proc.pid

    def alive(self) -> bool:
        """Return whether the zygote process is still running."""
        return self._proc.poll() is None

    def fork(self, spec: dict[str, Any]) -> tuple[KernelHandle, str]:
        """Fork a new episode kernel.

        Args:
            spec: The fork request (see ``zygote``): slot, uid, fresh, sizing,
                output_limit_bytes.

        Returns:
            The kernel and its working directory (as the kernel sees it).

        Raises:
            ZygoteDied: The zygote is gone.
            SandboxError: The zygote could not fork.
        """
        try:
            self._control.send(json.dumps(spec).encode())
        except OSError as exc:
            raise ZygoteDied(f"zygote for image {self.image!r} is gone: {exc}") from exc
        reply, fds = self._receive(self._request_timeout_s, spec["slot"])
        if "failure" in reply:
            for fd in fds:
                os.close(fd)
            raise SandboxError(f"zygote could not fork a kernel: {reply['failure']['message']}")
        sock_fd, pidfd = fds
        os.set_inheritable(pidfd, False)
        sock = socket.socket(fileno=sock_fd)
        sock.set_inheritable(False)
        try:
            pid = procctl.pidfd_pid(pidfd)  # the zygote numbers kernels in its own PID namespace
        except OSError as exc:
            sock.close()
            os.close(pidfd)
            raise SandboxError(f"the new kernel exited at once: {exc}") from exc
        # The server's end waits for replies by yielding to its event loop (loop_bridge).
        connection = FrameConnection(sock, wait_readable=loop_bridge.wait_readable)
        return KernelHandle(connection, pid, pidfd), reply["workdir"]

    def release(self, slot: str) -> None:
        """Remove a slot whose processes are all dead (unmounts its tmpfs).

        Raises:
            ZygoteDied: The zygote is gone (its slots went with its namespace).
        """
        try:
            self._control.send(json.dumps({"op": "release", "slot": slot}).encode())
        except OSError as exc:
            raise ZygoteDied(f"zygote for image {self.image!r} is gone: {exc}") from exc
        self._receive(self._request_timeout_s, slot)

    def _receive(
        self, timeout_s: float, slot: str | None = None
    ) -> tuple[dict[str, Any], list[int]]:
        """The zygote's next reply; with ``slot``, it must be the reply about that slot.

        Raises:
            ZygoteDied: No reply, or a reply about another slot: the zygote and this
                client are out of step, and its replies can no longer be trusted.
        """
        self._control.settimeout(timeout_s)
        try:
            data, fds, _, _ = socket.recv_fds(self._control, _MAX_REPLY_BYTES, 2)
        except (OSError, TimeoutError) as exc:
            raise ZygoteDied(f"zygote for image {self.image!r} did not answer: {exc}") from exc
        if not data:
            raise ZygoteDied(
                f"zygote for image {self.image!r} exited (status {self._proc.poll()}); "
                "see the server's stderr"
            )
        reply = json.loads(data)
        if slot is not None and reply.get("slot") != slot:
            for fd in fds:
                os.close(fd)
            raise ZygoteDied(
                f"zygote for image {self.image!r} answered about slot {reply.get('slot')!r} "
                f"when asked about {slot!r}: out of step, not used again"
            )
        return reply, fds

    def stop(self) -> None:
        """Close the control socket (the zygote then kills its kernels and exits). Idempotent."""
        self._control.close()
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
