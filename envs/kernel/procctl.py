"""Linux process control for the local sandbox: prctl flags and process-tree kills.

Model code may start background processes, double-fork or ``setsid`` away from its
process group, so killing one pid or one process group does not end an episode.
The kernel process makes itself a *child subreaper*, which keeps every orphaned
descendant attached to it; the whole tree can then be found by following the
parent links in ``/proc`` and stopped before it is killed, so nothing can fork
its way out while the kill is in progress.

Linux only (``prctl`` and ``/proc``).
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from collections.abc import Callable, Iterator

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_libc = ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, value: int) -> None:
    if _libc.prctl(option, value, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


def set_parent_death_signal(sig: int) -> None:
    """Ask the kernel to send ``sig`` to this process when its parent exits."""
    _prctl(_PR_SET_PDEATHSIG, sig)


_PR_SET_DUMPABLE = 4


def set_dumpable(dumpable: bool) -> None:
    """Set whether same-uid processes may read this process's memory, environment and fds in
    ``/proc``."""
    _prctl(_PR_SET_DUMPABLE, int(dumpable))


def set_child_subreaper() -> None:
    """Make orphaned descendants of this process reparent to it instead of to init."""
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def pidfd_pid(pidfd: int) -> int:
    """The pid, in this process's PID namespace, of the process ``pidfd`` refers to.

    A zygote in its own PID namespace reports its kernels' pids as numbered
    there; the server reads the number it must use from the pidfd itself.

    Raises:
        ProcessLookupError: The process has exited (the kernel reports ``-1``).
    """
    with open(f"/proc/self/fdinfo/{pidfd}") as f:
        for line in f:
            if line.startswith("Pid:"):
                pid = int(line.split()[1])
                if pid <= 0:
                    raise ProcessLookupError(f"the process of pidfd {pidfd} has exited")
                return pid
    raise OSError(f"fd {pidfd} is not a pidfd")


def parent_map() -> dict[int, int]:
    """Return ``{pid: ppid}`` for every process visible in ``/proc``."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # exited while we were looking
        # The command name is in parentheses and may contain spaces or ')'.
        fields = stat[stat.rindex(b")") + 2 :].split()
        parents[int(entry)] = int(fields[1])
    return parents


def descendants(root: int) -> set[int]:
    """Return the pids of every live descendant of ``root`` (not ``root`` itself)."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parent_map().items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def _signal_all(pids: set[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def kill_descendants(root: int) -> set[int]:
    """SIGKILL every descendant of ``root``, freezing the tree first.

    The tree is stopped with SIGSTOP and re-scanned until no new process
    appears, so a fork bomb cannot outrun the kill.

    Returns:
        The pids that were killed.
    """
    return _stop_then_kill(lambda: descendants(root))


def kill_process_group(pgid: int) -> None:
    """SIGKILL a process group, ignoring a group that no longer exists."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_tree(root: int, send: Callable[[int, int], None] = os.kill) -> set[int]:
    """SIGKILL ``root``, every descendant of it and its process group.

    ``root`` is stopped first, so it cannot fork while its tree is collected.

    Args:
        root: The tree's root pid; it must be a child of the caller or be
            signalled through ``send`` with a pidfd, so the pid cannot have
            been reused.
        send: Sends a signal to ``root`` (e.g. via ``signal.pidfd_send_signal``).
            If ``root`` no longer exists nothing is done: its orphans have been
            reparented away from it and cannot be found from it.

    Returns:
        The descendants that were killed (not ``root``).
    """
    try:
        send(root, signal.SIGSTOP)
    except ProcessLookupError:
        return set()
    killed = kill_descendants(root)
    try:
        send(root, signal.SIGKILL)
    except ProcessLookupError:
        pass  # it died meanwhile
    kill_process_group(root)
    return killed


def uid_processes(uid: int) -> set[int]:
    """Pids of the live processes whose real uid is ``uid``."""
    found: set[int] = set()
    wanted = str(uid)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                for line in f:
                    if line.startswith("Uid:"):
                        if line.split()[1] == wanted:
                            found.add(int(entry))
                        break
        except OSError:
            pass  # exited while we were looking
    return found


def kill_uid(uid: int) -> set[int]:
    """SIGKILL every process of ``uid`` (an episode's per-slot uid), freezing them first.

    The fallback for hosts without cgroup v2's ``cgroup.kill``; like
    ``kill_descendants`` it re-scans until no new process appears.

    Returns:
        The pids that were killed.
    """
    return _stop_then_kill(lambda: uid_processes(uid))


def _stop_then_kill(scan: Callable[[], set[int]]) -> set[int]:
    """SIGSTOP what ``scan`` finds until it finds nothing new, then SIGKILL it all."""
    stopped: set[int] = set()
    for _ in range(50):
        fresh = scan() - stopped
        if not fresh:
            break
        _signal_all(fresh, signal.SIGSTOP)
        stopped |= fresh
    _signal_all(stopped, signal.SIGKILL)
    return stopped


def exited_children() -> Iterator[int]:
    """Reap, without waiting, each child of this process that has exited; yield its pid.

    Ends when no exited child is left (or there are no children at all). The zygote and
    the slot runner call it whenever SIGCHLD may have arrived, to learn which of the
    kernels they forked are gone.
    """
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        yield pid


def reap(pids: set[int], timeout_s: float = 1.0) -> None:
    """Wait for killed processes that were (or are being) reparented to this subreaper.

    A killed descendant becomes this process's child only once its own parent
    has exited, so pids that are not (yet) children are retried until they
    vanish from ``/proc`` or ``timeout_s`` passes.
    """
    deadline = time.monotonic() + timeout_s
    pending = set(pids)
    while pending and time.monotonic() < deadline:
        for pid in list(pending):
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    pending.discard(pid)
            except ChildProcessError:
                if not os.path.exists(f"/proc/{pid}"):
                    pending.discard(pid)
        if pending:
            time.sleep(0.005)
