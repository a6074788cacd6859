"""The episode kernel's request loop: what a kernel process does for one sandbox, on any backend.

A kernel is a process forked from a warm parent (the local zygote, or the remote slot
runner) that already imported the image's modules and built the IPython shell
(``ipyshell``). Once the backend has set it up (the local backend confines it first:
``envs.local.child.run_kernel``), it serves one episode's requests over a framed
connection until the server closes it (``serve_episode``).

A kernel is forked before its episode is known (a *standby*). ``warm`` runs the
image's warm-up code so the pages a first cell touches are already copied;
``activate`` hands it its episode: the task files arrive as read-only file
descriptors and are copied into the working directory, then the environment
and the RNG seeds are applied (a fork copies the parent's RNG state).

Requests and replies are JSON frames (see ``envs.frames``):

* ``{"op": "warm", "code"}`` → ``{}``
* ``{"op": "activate", "names", "seed", "env"}`` + one fd per name → ``{}``
* ``{"op": "cell", "code", "silent"}`` → stdout, stderr, outputs, error, execution_count
* ``{"op": "shell", "command", "timeout_s"}`` → stdout, stderr, exit_code, timed_out
* ``{"op": "verify", "command", "timeout_s", "verifier_dir"}`` → as ``shell``, but with
  ``verifier_env.clean_env`` instead of the kernel's environment (``HOME`` and
  ``VERIFIER_DIR`` at ``verifier_dir``); refused (``PermissionError``)
  if this process can write a directory that environment trusts. Sent only to a kernel
  forked after every agent process was stopped, so no cell ever ran in it.
* ``{"op": "put", "path", "data_b64"}`` → ``{}``
* ``{"op": "get", "path"}`` → ``{"data_b64"}``
* ``{"op": "ping"}`` → ``{"pid"}``

A request that fails for a reason other than the model's code returns
``{"failure": {"type", "message"}}``.
"""

from __future__ import annotations

import base64
import io
import os
import random
import shutil
import signal
import subprocess
import sys
import traceback
from typing import Any

import numpy

from analyst_env.envs import verifier_env
from analyst_env.envs.frame_socket import ConnectionClosed, FrameConnection
from analyst_env.envs.kernel import procctl
from analyst_env.envs.kernel.capture import PipeCapture
from analyst_env.envs.kernel.ipyshell import KernelShell
from analyst_env.envs.kernel.workpath import resolve_inside


class _Interruptible:
    """SIGINT raises ``KeyboardInterrupt`` only while a cell runs.

    Outside a cell (e.g. while a reply is being written) a late interrupt from
    the server is ignored, so it cannot corrupt the protocol.
    """

    def __init__(self) -> None:
        self.active = False
        signal.signal(signal.SIGINT, self._on_sigint)

    def _on_sigint(self, signum: int, frame: Any) -> None:
        if self.active:
            raise KeyboardInterrupt

    def __enter__(self) -> None:
        self.active = True

    def __exit__(self, *exc_info: object) -> None:
        self.active = False


def _redirect_fd(fd: int, limit: int) -> PipeCapture:
    read_fd, write_fd = os.pipe()
    os.dup2(write_fd, fd)
    os.close(write_fd)
    return PipeCapture(read_fd, limit)


def _text_stream(fd: int) -> io.TextIOWrapper:
    # Unbuffered, so Python and C-level writes to the same fd stay in order.
    return io.TextIOWrapper(
        io.FileIO(fd, "w", closefd=False),
        encoding="utf-8",
        errors="backslashreplace",
        write_through=True,
    )


def _seed(seed: int | None) -> None:
    if seed is None:
        random.seed()
        numpy.random.seed()
    else:
        random.seed(seed)
        numpy.random.seed(seed % 2**32)


class _Kernel:
    """Serves one episode's requests.

    Args:
        conn: The framed connection to the server.
        shell: The IPython shell inherited from the zygote.
        spec: The fork request (workdir, seed, env, limits).
    """

    def __init__(self, conn: FrameConnection, shell: KernelShell, spec: dict[str, Any]) -> None:
        self.conn = conn
        self.shell = shell
        self.workdir = spec["workdir"]
        self.output_limit = spec["output_limit_bytes"]
        shell.output_limit = (
            self.output_limit
        )  # rich outputs get the same budget per cell as stdout
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        self.stdout = _redirect_fd(1, self.output_limit)
        self.stderr = _redirect_fd(2, self.output_limit)
        sys.stdout, sys.stderr = _text_stream(1), _text_stream(2)
        self.interruptible = _Interruptible()

    def serve(self) -> None:
        """Answer requests until the server closes the connection."""
        handlers = {
            "warm": self._warm,
            "activate": self._activate,
            "cell": self._cell,
            "shell": self._shell,
            "verify": self._verify,
            "put": self._put,
            "get": self._get,
            "ping": self._ping,
        }
        while True:
            try:
                request = self.conn.recv()
            except ConnectionClosed:
                return
            try:
                reply = handlers[request["op"]](request)
            except Exception as exc:
                reply = {"failure": {"type": type(exc).__name__, "message": str(exc)}}
            self.conn.send(reply)

    def _warm(self, request: dict[str, Any]) -> dict[str, Any]:
        exec(compile(request["code"], "<warm-up>", "exec"), {})
        self.shell.execute("1 + 1", silent=True)  # touch the cell path too
        sys.stdout.flush()
        sys.stderr.flush()
        self.stdout.take()
        self.stderr.take()
        return {}

    def _activate(self, request: dict[str, Any]) -> dict[str, Any]:
        fds = self.conn.take_fds()
        try:
            if len(fds) != len(request["names"]):
                raise ValueError(
                    f"got {len(fds)} file descriptors for {len(request['names'])} files"
                )
            for name, fd in zip(request["names"], fds):
                target = resolve_inside(self.workdir, name)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(fd, "rb", closefd=False) as src, open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
        finally:
            for fd in fds:
                os.close(fd)
        os.environ.update(request["env"])
        _seed(request["seed"])
        return {}

    def _cell(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            with self.interruptible:
                record, count = self.shell.execute(request["code"], silent=request["silent"])
            outputs, error = record.outputs, record.error
        except KeyboardInterrupt as exc:
            # Interrupted outside IPython's own handler (e.g. while showing figures).
            outputs, count = [], None
            error = {
                "name": "KeyboardInterrupt",
                "value": "",
                "traceback": "".join(traceback.format_exception(exc)),
            }
        sys.stdout.flush()
        sys.stderr.flush()
        return {
            "stdout": self.stdout.take(),
            "stderr": self.stderr.take(),
            "outputs": outputs,
            "error": error,
            "execution_count": count,
        }

    def _verify(self, request: dict[str, Any]) -> dict[str, Any]:
        verifier_dir = resolve_inside(self.workdir, request["verifier_dir"])
        env = verifier_env.clean_env(verifier_dir, {"VERIFIER_DIR": verifier_dir})
        writable = verifier_env.writable_trusted_dirs(env)
        if writable:
            raise PermissionError(
                "verification refused: the sandbox's processes can write "
                f"{', '.join(writable)}, so a program there could have been replaced by the agent"
            )
        return self._shell(request, env)

    def _shell(self, request: dict[str, Any], env: dict[str, str] | None = None) -> dict[str, Any]:
        read_out, write_out = os.pipe()
        read_err, write_err = os.pipe()
        out = PipeCapture(read_out, self.output_limit)
        err = PipeCapture(read_err, self.output_limit)
        try:
            proc = subprocess.Popen(
                request["command"],
                shell=True,
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=write_out,
                stderr=write_err,
                start_new_session=True,
                env=env,
            )
        except OSError as exc:
            return {"stdout": "", "stderr": f"{exc}\n", "exit_code": 127, "timed_out": False}
        finally:
            os.close(write_out)
            os.close(write_err)
        try:
            exit_code: int | None = proc.wait(timeout=request["timeout_s"])
            timed_out = False
        except subprocess.TimeoutExpired:
            orphans = procctl.kill_tree(proc.pid)
            proc.wait()
            procctl.reap(orphans)
            exit_code, timed_out = None, True
        return {
            "stdout": out.take(),
            "stderr": err.take(),
            "exit_code": exit_code,
            "timed_out": timed_out,
        }

    def _put(self, request: dict[str, Any]) -> dict[str, Any]:
        path = resolve_inside(self.workdir, request["path"])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(request["data_b64"]))
        return {}

    def _get(self, request: dict[str, Any]) -> dict[str, Any]:
        with open(resolve_inside(self.workdir, request["path"]), "rb") as f:
            return {"data_b64": base64.b64encode(f.read()).decode("ascii")}

    def _ping(self, request: dict[str, Any]) -> dict[str, Any]:
        return {"pid": os.getpid()}


def serve_episode(
    conn: FrameConnection, shell: KernelShell, workdir: str, output_limit_bytes: int
) -> None:
    """Serve one episode's requests on ``conn`` until it closes.

    The local backend calls it from ``envs.local.child.run_kernel`` once the kernel is
    confined; the remote slot runner (``envs.remote.runner``) forks its kernels without
    the local slot machinery and serves them through this same loop.
    """
    _Kernel(conn, shell, {"workdir": workdir, "output_limit_bytes": output_limit_bytes}).serve()
