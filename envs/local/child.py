"""The local backend's kernel start: what a child forked by the zygote does before it serves.

The zygote forks, and the child calls ``run_kernel``. It detaches from the
zygote's life (dies with it, but in its own session), becomes a subreaper so it
can account for everything model code starts, confines itself
(``isolation.confine_child``: namespaces, per-slot uid, rlimits, seccomp) and
locks the subreaper flag on (``subreaper_lock``: a cell cannot clear it to move a
process out of the tree the kill before verification follows),
enters its slot's working directory and then serves requests over its socket
until the server closes it (``envs.kernel.child.serve_episode``, the same loop the
remote slot runner's kernels serve).
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import tempfile
import traceback
from collections.abc import Sequence
from typing import Any, NoReturn

from analyst_env.envs.frame_socket import FrameConnection
from analyst_env.envs.kernel import procctl
from analyst_env.envs.kernel.child import serve_episode
from analyst_env.envs.kernel.ipyshell import KernelShell
from analyst_env.envs.local import isolation, subreaper_lock


def run_kernel(
    sock: socket.socket,
    spec: dict[str, Any],
    shell: KernelShell,
    zygote_pid: int,
    mode: isolation.Mode,
    seccomp_filter: bytes | None,
    readable: Sequence[str] = (),
) -> NoReturn:
    """Set up this freshly forked process as an episode kernel and serve it.

    Args:
        sock: This kernel's end of the socketpair to the server.
        spec: The fork request plus ``slot_dir`` and ``workdir`` (see ``zygote``).
        shell: The zygote's IPython shell.
        zygote_pid: The parent's pid, to detect that it died before the
            parent-death signal was armed.
        mode: The isolation mode.
        seccomp_filter: The prebuilt seccomp program, if any.
        readable: Mode ``landlock``: the paths the kernel may read.
    """
    status = 0
    try:
        procctl.set_parent_death_signal(signal.SIGKILL)
        if os.getppid() != zygote_pid:
            os._exit(1)
        os.setsid()
        procctl.set_child_subreaper()
        sizing = isolation.Sizing(**spec["sizing"])
        isolation.confine_child(
            mode, spec["slot_dir"], spec["uid"], sizing, seccomp_filter, readable
        )
        if seccomp_filter is not None:
            # Every mode sets no_new_privs; where the deny-list loads, this stacks on it.
            subreaper_lock.lock()
        procctl.set_parent_death_signal(signal.SIGKILL)  # a uid change cleared it
        if os.getppid() != zygote_pid:
            os._exit(1)
        os.chdir(spec["workdir"])
        tmp = "/tmp" if mode in isolation.NAMESPACE_MODES else os.path.join(spec["slot_dir"], "tmp")
        path = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", os.defpath)
        os.environ.update(HOME=spec["workdir"], TMPDIR=tmp, MPLCONFIGDIR=tmp, PATH=path)
        # The zygote may have asked tempfile for its directory already (an import that made a
        # temporary file): that cached answer names the zygote's, which the kernel cannot write.
        tempfile.tempdir = None
        conn = FrameConnection(sock, accept_fds=True)
        serve_episode(conn, shell, spec["workdir"], spec["output_limit_bytes"])
    except BaseException:
        traceback.print_exc()
        status = 1
    finally:
        os._exit(status)
