"""The server's handle on one episode kernel process.

The kernel is a child of the zygote, not of the server, so the server cannot
``waitpid`` it and a bare pid could be reused once the zygote reaps it. The
handle therefore signals through a pidfd (received from the zygote), which
always refers to the original process.
"""

from __future__ import annotations

import os
import signal

from analyst_env.envs.frame_socket import FrameConnection
from analyst_env.envs.kernel import procctl


class KernelHandle:
    """A running kernel: its connection, pid and pidfd.

    Args:
        conn: Framed connection to the kernel.
        pid: The kernel's pid (for ``/proc`` walks and its process group).
        pidfd: A pidfd for the kernel; the handle owns it.
    """

    def __init__(self, conn: FrameConnection, pid: int, pidfd: int) -> None:
        self.conn = conn
        self.pid = pid
        self._pidfd = pidfd
        self._killed = False
        self._released = False

    def _send(self, pid: int, sig: int) -> None:
        signal.pidfd_send_signal(self._pidfd, sig)

    def interrupt(self) -> None:
        """Send SIGINT to the kernel (ignored if it has exited)."""
        try:
            self._send(self.pid, signal.SIGINT)
        except (ProcessLookupError, OSError):
            pass

    def kill(self) -> None:
        """SIGKILL the kernel and its whole process tree. Idempotent; safe from any thread."""
        if self._killed:
            return
        self._killed = True
        procctl.kill_tree(self.pid, send=self._send)

    def mark_killed(self) -> None:
        """Record that the tree was killed another way (e.g. ``cgroup.kill``), so ``release`` skips
        it."""
        self._killed = True

    def release(self) -> None:
        """Kill the tree, then close the connection and the pidfd. Idempotent.

        Must not race with a call blocked on ``conn``: callers kill first, then
        release once no call is in flight.
        """
        if self._released:
            return
        self.kill()
        self._released = True
        self.conn.close()
        os.close(self._pidfd)
