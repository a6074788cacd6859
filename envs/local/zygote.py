"""The zygote: a warm, single-threaded process that forks episode kernels.

Importing numpy, pandas and duckdb and building an IPython shell takes about a
second; forking a process that has already done it takes about 10 ms, and the
children share its pages copy-on-write. The server starts a zygote per image
(more on a burst of resets, ``zygotes``) with ``python -m
analyst_env.envs.local.zygote`` (never ``os.fork`` from the server, which has
threads) and talks to it over a ``SOCK_SEQPACKET`` control socket, one JSON
message per request:

* zygote → server, once warm and confined: ``{"op": "ready", "pid", "exposed"}``
* server → zygote: ``{"op": "fork", "slot", "uid", "fresh", "sizing",
  "output_limit_bytes"}``; with ``fresh`` the zygote first creates the slot
  (a tmpfs owned by the slot uid, see ``slot_dirs.make_slot``)
* zygote → server: ``{"slot", "pid", "workdir"}`` with two file descriptors attached
  (``SCM_RIGHTS``): the server's end of the kernel's socketpair and a pidfd for
  the kernel, so the server can signal it without pid-reuse races; or
  ``{"failure"}``.
* server → zygote: ``{"op": "release", "slot"}`` once the slot's processes
  are dead: the slot's tmpfs is unmounted → ``{"slot"}``.

Every reply names the slot it answers for: the server checks it, so a reply taken
by the wrong request (two requests in flight on one zygote) is refused, never used.

Before serving, the zygote confines itself (``isolation.enter_zygote``: user
namespace where needed, the private root view) and builds the seccomp filter
its kernels load; each kernel then confines itself further right after fork.

The zygote holds no threads at fork time (the server starts it with BLAS pools
pinned to one thread, and the count is checked), reaps its children, and,
being a subreaper, kills processes orphaned by a kernel that died. It exits
when the server closes the control socket, killing its kernels' trees.

Linux only.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import select
import signal
import socket
from typing import Any

import matplotlib

from analyst_env.envs.fork_env import freeze_for_fork
from analyst_env.envs.kernel import procctl
from analyst_env.envs.kernel.image_specs import IMAGES, MPL_BACKEND, ImageSpec, apply_mpl_rc
from analyst_env.envs.kernel.ipyshell import KernelShell, build_shell, warm_cell_paths
from analyst_env.envs.kernel_helpers import HELPER_SOURCE
from analyst_env.envs.local import isolation, seccomp, slot_dirs
from analyst_env.envs.local.child import run_kernel

MAX_MESSAGE_BYTES = 1 << 20


def prepare(image: ImageSpec) -> KernelShell:
    """Import and warm ``image``, build the shell, and freeze the heap for forking.

    Raises:
        RuntimeError: Something left a thread running; forking would be unsafe.
    """
    matplotlib.use(MPL_BACKEND)
    apply_mpl_rc()
    for module in image.preload:
        importlib.import_module(module)
    shell = build_shell()
    # Kernels inherit the tools' helpers with the heap, so no reset has to define them.
    shell.run_cell(HELPER_SOURCE, store_history=False, silent=True)
    exec(compile(image.warm_up, f"<warm-up {image.name}>", "exec"), {})
    warm_cell_paths(shell)
    freeze_for_fork("zygote")
    return shell


class Zygote:
    """Serves fork requests on the control socket.

    Args:
        control: The zygote's end of the ``SOCK_SEQPACKET`` control socketpair.
        shell: The warmed shell every kernel inherits.
        mode: The isolation mode (already entered).
        host_root: The backend's root directory (slots live there in mode ``none``).
        exposed: The host paths the private root shows (for the ready message).
    """

    def __init__(
        self,
        control: socket.socket,
        shell: KernelShell,
        mode: isolation.Mode = "none",
        host_root: str = "/tmp",
        exposed: list[str] | None = None,
    ) -> None:
        self.control = control
        self.shell = shell
        self.mode = mode
        self.host_root = host_root
        self.exposed = exposed or []
        self.seccomp_filter = seccomp.build_filter() if seccomp.supported() else None
        self.kernels: set[int] = set()
        self.pid = os.getpid()
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)

    def serve(self) -> None:
        """Fork kernels on request until the server closes the control socket."""
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        signal.set_wakeup_fd(self._wake_write)
        procctl.set_child_subreaper()
        ready = {"op": "ready", "pid": self.pid, "exposed": self.exposed[:200]}
        self.control.send(json.dumps(ready).encode())
        while True:
            watched: list[socket.socket | int] = [self.control, self._wake_read]
            readable = select.select(watched, [], [])[0]
            if self._wake_read in readable:
                self._drain_wakeups()
                self._reap()
            if self.control in readable:
                data = self.control.recv(MAX_MESSAGE_BYTES)
                if not data:
                    break
                request = json.loads(data)
                if request.get("op") == "release":
                    slot_dirs.remove_slot(self.mode, self.host_root, request["slot"])
                    self.control.send(json.dumps({"slot": request["slot"]}).encode())
                else:
                    self._fork(request)
        for pid in self.kernels:
            procctl.kill_tree(pid)

    def _fork(self, spec: dict[str, Any]) -> None:
        try:
            slot_dir = os.path.join(slot_dirs.slots_dir(self.mode, self.host_root), spec["slot"])
            if spec["fresh"]:
                slot_dirs.make_slot(
                    self.mode, self.host_root, spec["slot"], spec["uid"], spec["sizing"]["disk_mb"]
                )
            spec = {**spec, "slot_dir": slot_dir, "workdir": os.path.join(slot_dir, "work")}
        except OSError as exc:
            self._refuse(spec["slot"], exc, f"slot setup: {exc}")
            return
        parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            pid = os.fork()
        except OSError as exc:
            parent_end.close()
            child_end.close()
            self._refuse(spec["slot"], exc, str(exc))
            return
        if pid == 0:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.close(self._wake_read)
            os.close(self._wake_write)
            self.control.close()
            parent_end.close()
            run_kernel(
                child_end, spec, self.shell, self.pid, self.mode, self.seccomp_filter, self.exposed
            )
        child_end.close()
        self.kernels.add(pid)
        pidfd = os.pidfd_open(pid)
        try:
            reply = {"slot": spec["slot"], "pid": pid, "workdir": spec["workdir"]}
            fds = [parent_end.fileno(), pidfd]
            socket.send_fds(self.control, [json.dumps(reply).encode()], fds)
        finally:
            parent_end.close()
            os.close(pidfd)

    def _refuse(self, slot: str, exc: OSError, message: str) -> None:
        failure = {"type": type(exc).__name__, "message": message}
        self.control.send(json.dumps({"slot": slot, "failure": failure}).encode())

    def _drain_wakeups(self) -> None:
        try:
            while os.read(self._wake_read, 4096):
                pass
        except BlockingIOError:
            pass

    def _reap(self) -> None:
        kernel_died = False
        for pid in procctl.exited_children():
            if pid in self.kernels:
                self.kernels.discard(pid)
                kernel_died = True
        if kernel_died:
            # A dead kernel's descendants were reparented here; nobody else can end them.
            for pid, ppid in procctl.parent_map().items():
                if ppid == self.pid and pid not in self.kernels:
                    procctl.kill_tree(pid)


def main() -> None:
    """Entry point: ``python -m analyst_env.envs.local.zygote --image NAME --control-fd FD ...``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--image", required=True, help=f"one of {sorted(IMAGES)}, or a baked image's name"
    )
    parser.add_argument("--image-spec", help="the ImageSpec (JSON) of a baked image")
    parser.add_argument("--control-fd", type=int, required=True)
    parser.add_argument("--mode", default="none", choices=list(isolation.STRENGTH))
    parser.add_argument("--host-root", required=True, help="the backend's root directory")
    parser.add_argument("--package-dir", required=True, help="hidden from kernels")
    parser.add_argument(
        "--hide", action="append", default=[], help="another directory hidden from kernels"
    )
    args = parser.parse_args()
    control = socket.socket(fileno=args.control_fd)
    if args.image_spec:
        image = ImageSpec.from_json(args.image_spec)
    elif args.image in IMAGES:
        image = IMAGES[args.image]
    else:
        parser.error(f"unknown image {args.image!r} and no --image-spec")
    shell = prepare(image)
    scratch = os.path.join(args.host_root, f"view-{os.getpid()}")
    exposed: list[str] = []
    if args.mode != "none":
        if args.mode in isolation.NAMESPACE_MODES:
            os.makedirs(scratch, exist_ok=True)
        exposed = isolation.enter_zygote(args.mode, scratch, args.package_dir, args.hide)
        if args.mode in isolation.NAMESPACE_MODES:
            isolation.enter_pid_namespace(control.fileno())
    Zygote(control, shell, args.mode, args.host_root, exposed).serve()


if __name__ == "__main__":
    main()
