"""``Runner``: the slot runner's request loop, relaying episode requests to forked kernels.

The protocol is described in ``runner`` (the process's entry point, which
preloads modules and then hands the warm shell to a ``Runner``).
"""

from __future__ import annotations

import base64
import os
import select
import shutil
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from analyst_env.envs.frames import Decoder, encode
from analyst_env.envs.task_files import check_task_file_name

_ACTIVATE_TIMEOUT_S = 60.0


class Runner:
    """Serves one slot: relays episode requests to the current forked kernel.

    Args:
        in_fd: Where requests arrive (the process's original stdin).
        out_fd: Where replies go (the process's original stdout).
        shell: The warmed IPython shell every kernel inherits.
        workdir: The slot's working directory (emptied between episodes).
        output_limit_bytes: stdout/stderr kept per cell or command.
    """

    def __init__(
        self,
        in_fd: int,
        out_fd: int,
        shell: Any,
        workdir: str,
        output_limit_bytes: int,
        warm_up: str = "pass",
    ) -> None:
        self.in_fd = in_fd
        self.out_fd = out_fd
        self.shell = shell
        self.workdir = workdir
        self.output_limit_bytes = output_limit_bytes
        self.warm_up = warm_up
        self.pid = os.getpid()
        self.child_pid: int | None = None
        self.child_sock: socket.socket | None = None
        self.child_decoder = Decoder()
        self.pending = False
        self.pending_id: Any = None
        self.standby: tuple[int, socket.socket, Decoder] | None = None
        self.standby_warming = False
        self.child_reaped = False
        self.seed: int | None = None
        self.env: dict[str, str] = {}

    # ── I/O ────────────────────────────────────────────────────────────────
    def send(self, message: dict[str, Any]) -> None:
        data = memoryview(encode(message))
        while data:
            written = os.write(self.out_fd, data)
            data = data[written:]

    def serve(self) -> None:
        """Answer requests until stdin closes."""
        decoder = Decoder()
        while True:
            watched = [self.in_fd] + ([self.child_sock] if self.child_sock is not None else [])
            if self.standby is not None and self.standby_warming:
                watched.append(self.standby[1])
            readable = select.select(watched, [], [], 1.0)[0]
            self._reap()
            if self.standby is not None and self.standby[1] in readable:
                self._call(
                    self.standby[1], self.standby[2], None
                )  # its warm-up finished (or it died)
                self.standby_warming = False
            if self.child_sock is not None and self.child_sock in readable:
                self._pump_child()
            if self.in_fd in readable:
                chunk = os.read(self.in_fd, 1 << 20)
                if not chunk:
                    break
                for request in decoder.feed(chunk):
                    self._handle(request)
        self._end_child()
        if self.standby is not None:
            from analyst_env.envs.kernel import procctl

            procctl.kill_tree(self.standby[0])

    # ── requests ───────────────────────────────────────────────────────────
    def _handle(self, request: dict[str, Any]) -> None:
        op = request.get("op")
        if op == "interrupt":
            if self.pending and self.child_pid is not None:
                try:
                    os.kill(self.child_pid, signal.SIGINT)
                except ProcessLookupError:
                    pass
            return
        rid = request.pop("id", None)
        # Keyed by object: ``op`` is whatever the request carried (None when absent).
        handlers: dict[object, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "start": self._start,
            "restart": self._restart,
            "stop_agent": self._stop_agent,
            "end": self._end,
        }
        handler = handlers.get(op)
        if handler is not None:
            try:
                reply = handler(request)
            except Exception as exc:
                reply = {"failure": {"type": type(exc).__name__, "message": str(exc)}}
            self.send({**reply, "id": rid})
            # Off the caller's path: tear down the ended episode, fork and warm the next kernel.
            if op == "end":
                self._end_child()
                self._empty_workdir()
                self.ensure_standby()
            return
        if self.child_sock is None or self.pending:
            why = (
                "a request is already running"
                if self.pending
                else "no episode is active in this slot"
            )
            self.send({"failure": {"type": "RuntimeError", "message": why}, "id": rid})
            return
        try:
            self.child_sock.sendall(encode(request))
            self.pending, self.pending_id = True, rid
        except OSError:
            self._child_gone()
            self.send(
                {"kernel_died": "the kernel exited before the request could be sent", "id": rid}
            )

    def _start(self, request: dict[str, Any]) -> dict[str, Any]:
        from analyst_env.envs.kernel.workpath import resolve_inside

        self._end_child()
        self._empty_workdir()
        for name, data in request.get("files", {}).items():
            check_task_file_name(name)
            target = resolve_inside(self.workdir, name)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as f:
                f.write(base64.b64decode(data))
        self.seed = request.get("seed")
        self.env = dict(request.get("env") or {})
        self._fork_child()
        return {"workdir": self.workdir, "pid": self.child_pid}

    def _restart(self, request: dict[str, Any]) -> dict[str, Any]:
        self._end_child()
        self._fork_child()
        return {"pid": self.child_pid}

    def _stop_agent(self, request: dict[str, Any]) -> dict[str, Any]:
        """Before verification: kill every descendant of this runner (the kernel, whatever it
        started, the standby, which shared the slot with the agent) and fork a fresh kernel.

        The runner is a child subreaper and every kernel is forked from it, so a detached
        or double-forked process stays its descendant (even if the kernel's own subreaper
        flag was cleared); each is stopped, then killed, re-scanning until none is new.
        """
        from analyst_env.envs.kernel import procctl

        if self.standby is not None:
            self.standby[1].close()
            self.standby, self.standby_warming = None, False
        self._end_child()
        procctl.kill_descendants(self.pid)
        self._reap()
        self._fork_child()
        return {"pid": self.child_pid}

    def _end(self, request: dict[str, Any]) -> dict[str, Any]:
        return {}  # the teardown runs after the reply (see ``_handle``)

    # ── the episode kernel ─────────────────────────────────────────────────
    def ensure_standby(self) -> None:
        """Fork the next episode's kernel ahead of time, so a start only activates it."""
        if self.standby is None:
            try:
                self.standby = self._spawn()
            except OSError as exc:
                print(f"runner: could not fork a standby kernel: {exc}", file=sys.stderr)
                return
            # Pre-touch what a first cell touches (copy-on-write faults), as local standbys do.
            # The reply is collected by the serve loop, so the runner stays responsive.
            try:
                self.standby[1].sendall(encode({"op": "warm", "code": self.warm_up}))
                self.standby_warming = True
            except OSError:
                pass

    def _fork_child(self) -> None:
        """Make the standby (or a fresh fork) the episode's kernel and activate it."""
        for _attempt in range(2):
            if self.standby is not None and self.standby_warming:
                self._call(self.standby[1], self.standby[2], None)  # let its warm-up finish
            self.standby_warming = False
            spawned, self.standby = self.standby or self._spawn(), None
            self.child_pid, self.child_sock, self.child_decoder = spawned
            self.child_reaped = False
            reply = self._child_call(
                {"op": "activate", "names": [], "seed": self.seed, "env": self.env}
            )
            if reply is not None and "failure" not in reply:
                return
            self._end_child()
        raise RuntimeError(f"the new kernel did not start: {reply}")

    def _spawn(self) -> tuple[int, socket.socket, Decoder]:
        from analyst_env.envs.kernel import procctl

        parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            status = 0
            try:
                parent_end.close()
                if self.standby is not None:
                    self.standby[1].close()
                os.close(self.in_fd)
                os.close(self.out_fd)
                procctl.set_parent_death_signal(signal.SIGKILL)
                if os.getppid() != self.pid:
                    os._exit(1)
                os.setsid()
                procctl.set_child_subreaper()
                os.chdir(self.workdir)
                os.environ.update(HOME=self.workdir)
                from analyst_env.envs.frame_socket import FrameConnection
                from analyst_env.envs.kernel.child import serve_episode

                serve_episode(
                    FrameConnection(child_end, accept_fds=True),
                    self.shell,
                    self.workdir,
                    self.output_limit_bytes,
                )
            except BaseException:
                traceback.print_exc()
                status = 1
            finally:
                os._exit(status)
        child_end.close()
        return pid, parent_end, Decoder()

    def _child_call(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """Send a request to the kernel and wait for its reply (None: it died or hung)."""
        assert self.child_sock is not None
        return self._call(self.child_sock, self.child_decoder, message)

    @staticmethod
    def _call(
        sock: socket.socket, decoder: Decoder, message: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        """Send ``message`` (unless None) and wait for the next reply on ``sock``."""
        try:
            if message is not None:
                sock.sendall(encode(message))
        except OSError:
            return None
        deadline = time.monotonic() + _ACTIVATE_TIMEOUT_S
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([sock], [], [], remaining)[0]:
                return None
            try:
                chunk = sock.recv(1 << 20)
            except OSError:
                return None
            if not chunk:
                return None
            messages = decoder.feed(chunk)
            if messages:
                return messages[0]

    def _pump_child(self) -> None:
        assert self.child_sock is not None
        try:
            chunk = self.child_sock.recv(1 << 20)
        except OSError:
            chunk = b""
        if not chunk:
            message = "the kernel process died (a crash, os._exit or the out-of-memory killer)"
            was_pending = self.pending
            self._child_gone()
            if was_pending:
                self.send({"kernel_died": message, "id": self.pending_id})
            return
        for reply in self.child_decoder.feed(chunk):
            if self.pending:
                self.pending = False
                self.send({**reply, "id": self.pending_id})

    def _child_gone(self) -> None:
        self.pending = False
        if self.child_sock is not None:
            self.child_sock.close()
        self.child_sock = None
        self._kill_tree()

    def _end_child(self) -> None:
        self._child_gone()

    def _kill_tree(self) -> None:
        """Kill the kernel, its descendants and anything orphaned to this runner; reap them."""
        from analyst_env.envs.kernel import procctl

        if self.child_pid is None:
            return  # nothing ran since the last teardown
        if not self.child_reaped:  # a reaped pid may already belong to another process
            procctl.kill_tree(self.child_pid)
            try:
                os.waitpid(self.child_pid, 0)
            except ChildProcessError:
                pass
        self.child_pid, self.child_reaped = None, False
        standby = self.standby[0] if self.standby is not None else None
        for pid, ppid in procctl.parent_map().items():
            if ppid == self.pid and pid != standby:
                procctl.kill_tree(pid)
        self._reap()

    def _reap(self) -> None:
        from analyst_env.envs.kernel import procctl

        for pid in procctl.exited_children():
            if pid == self.child_pid:
                self.child_reaped = True
            elif self.standby is not None and pid == self.standby[0]:
                self.standby[1].close()  # it died waiting; the next start forks afresh
                self.standby, self.standby_warming = None, False

    def _empty_workdir(self) -> None:
        os.makedirs(self.workdir, exist_ok=True)
        for entry in os.scandir(self.workdir):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                try:
                    os.unlink(entry.path)
                except FileNotFoundError:
                    pass
