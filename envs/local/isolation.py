"""How an episode kernel is confined: the isolation modes and the per-child setup.

Three modes, chosen once per backend (``auto`` picks the strongest available):

* ``full`` (the server runs as root): the zygote lives in the private root view
  (``rootview``); each kernel gets new network (loopback only), mount, IPC and
  UTS namespaces, its slot's tmpfs as working directory and ``/tmp``, its own
  unprivileged **per-slot uid** (so episodes cannot signal, trace or read each
  other or the server), rlimits (including ``RLIMIT_NPROC``, which counts per
  uid and so per episode), ``no_new_privs`` and the seccomp deny-list. The
  server adds cgroup limits and kills through ``cgroups``.
* ``userns`` (unprivileged server with user namespaces): the zygote enters a
  user namespace, then the same view and namespaces, but every kernel runs as
  the server's uid (mapped to root inside, with all capabilities dropped), so
  episodes are hidden from the server's files but not from each other's
  signals; no cgroups, so the memory limit is per process (``RLIMIT_AS``).
* ``landlock`` (no namespaces allowed, e.g. a container under Docker's default
  seccomp profile as uid 1000): each kernel restricts itself with Landlock
  (``landlock``: read-only system and interpreter trees without the server's
  package and state, read-write only its own slot, no TCP, no signals or
  abstract sockets beyond itself), a seccomp filter that allows only
  ``AF_UNIX`` sockets, rlimits, and is not dumpable (so same-uid processes
  cannot read its memory or environment); the server and zygote are not
  dumpable either. Episodes share the host's PID namespace: they can list
  processes and read world-readable ``/proc`` files such as command lines.
* ``none``: no namespaces; rlimits, ``no_new_privs`` and seccomp only. Never chosen
  by ``auto``: only when asked for by name, on loopback, without builds
  (``fail_closed``).

The child's setup order follows the measured recipe: namespaces and mounts
while still privileged, then uid, rlimits, ``no_new_privs`` and seccomp last;
``confine_child`` keeps that order and each step's system calls are in ``confine_steps``.
"""

from __future__ import annotations

import functools
import os
import platform
import resource
import signal
import socket
import stat
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from analyst_env.envs.kernel import procctl
from analyst_env.envs.local import fail_closed, landlock, rootview, seccomp
from analyst_env.envs.local import syscalls as sc
from analyst_env.envs.local.confine_steps import (
    drop_capabilities,
    loopback_up,
    mapped_bytes,
    only_own_slot,
    set_limit,
)

Mode = Literal["full", "userns", "landlock", "none"]
MODES: tuple[str, ...] = ("auto", "full", "userns", "landlock", "none")
NAMESPACE_MODES = ("full", "userns")


def uses_slot_uids(mode: str) -> bool:
    """Whether kernels switch to per-slot uids: ``full``, and ``landlock`` when the server is root.

    Without a private root, a slot uid reads the interpreter through the host's
    own directories, so ``landlock`` uses slot uids only where every directory
    above the interpreter lets any user through (not a pyenv under ``/root``);
    otherwise its kernels keep the server's uid with every capability dropped.
    """
    if mode == "full":
        return True
    return mode == "landlock" and os.geteuid() == 0 and _interpreter_world_reachable()


@functools.cache
def _interpreter_world_reachable() -> bool:
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        path = os.path.realpath(prefix)
        while True:
            if not os.stat(path).st_mode & stat.S_IXOTH:
                return False
            if path == "/":
                break
            path = os.path.dirname(path)
    return True


STRENGTH: tuple[Mode, ...] = ("full", "userns", "landlock", "none")
"""Modes from strongest to weakest: ``auto`` takes the first that works here, never ``none``."""
NOFILE_LIMIT = 4096
CPU_TIME_LIMIT_S = 3600


@dataclass(frozen=True)
class Sizing:
    """Resources of one episode (its kernel and everything it starts).

    Attributes:
        memory_mb: Memory of the whole episode (cgroup); each process may also
            map at most this much beyond what the zygote had mapped (``RLIMIT_AS``).
        cpus: CPU share, in cores (cgroup quota).
        pids: Processes and threads of the episode (cgroup, and ``RLIMIT_NPROC``
            under a per-slot uid).
        disk_mb: Size of the episode's tmpfs (working directory plus ``/tmp``)
            and the largest file it may write (``RLIMIT_FSIZE``).
    """

    memory_mb: int = 4096
    cpus: float = 1.0
    pids: int = 256
    disk_mb: int = 1024

    def __post_init__(self) -> None:
        if self.memory_mb < 64 or self.cpus <= 0 or self.pids < 16 or self.disk_mb < 1:
            raise ValueError(
                f"invalid sandbox sizing {self}: need memory_mb>=64, cpus>0, pids>=16, disk_mb>=1"
            )

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe dict (for the zygote's fork requests)."""
        return asdict(self)


def user_namespaces_available() -> bool:
    """Whether this kernel lets an unprivileged process create user namespaces."""
    try:
        with open("/proc/sys/user/max_user_namespaces") as f:
            if int(f.read()) == 0:
                return False
    except OSError:
        return False
    try:
        with open("/proc/sys/kernel/unprivileged_userns_clone") as f:
            return f.read().strip() != "0"
    except OSError:
        return True


def resolve_mode(requested: str) -> Mode:
    """The mode to run: ``requested``, or for ``auto`` the strongest this process can use.

    Raises:
        ValueError: Unknown mode, or ``full`` requested without root.
    """
    if requested not in MODES:
        raise ValueError(f"unknown isolation mode {requested!r}; choose one of {list(MODES)}")
    if requested == "auto":
        if os.geteuid() == 0:
            return "full"
        return "userns" if user_namespaces_available() else "landlock"  # never "none"
    if requested == "full" and os.geteuid() != 0:
        raise fail_closed.Refusal(
            "isolation full needs the server to run as root; use ANALYST_ENV_ISOLATION=auto"
        )
    if requested == "landlock" and not seccomp.supported():
        raise fail_closed.Refusal(
            f"isolation landlock needs a seccomp filter for this architecture "
            f"({platform.machine()}; there is one for x86_64 and aarch64) to refuse sockets "
            "and IPC; choose another with ANALYST_ENV_ISOLATION (--isolation)"
        )
    if requested == "landlock" and landlock.abi() < 1:
        raise fail_closed.Refusal(
            "isolation landlock needs a kernel with Landlock enabled (ABI 6, Linux >= 6.12, "
            "lsm=landlock); choose another with ANALYST_ENV_ISOLATION (--isolation)"
        )
    return requested  # type: ignore[return-value]


def choose_mode(requested: str) -> tuple[Mode, dict[str, Any]]:
    """The mode to run, tried for real (``probe``): ``requested``, or for ``auto`` the strongest
    that works.

    Returns:
        The mode and a report: ``tried`` (each stronger mode that failed, with
        why) and ``facts`` (what the probe's confined kernel saw of itself).

    Raises:
        ValueError: Unknown mode.
        fail_closed.Refusal: An explicit mode that cannot be honoured here, or for
            ``auto`` no real mode at all (the message names what failed; ``auto``
            never serves ``none``).
    """
    from analyst_env.envs.local import probe

    first = resolve_mode(requested)  # static checks and auto's first guess
    if requested == "none":
        return "none", {"tried": {}, "facts": {}}  # asked for by name: the caller's rules apply
    candidates: list[Mode] = [first]
    if requested == "auto":
        # ``none`` is never a candidate: it is served only when asked for by name (fail_closed).
        candidates = [m for m in STRENGTH if m != "none" and (m != "full" or os.geteuid() == 0)]
    tried: dict[str, str] = {}
    if os.geteuid() != 0 and requested == "auto":
        tried["full"] = "needs the server to run as root"
    for mode in candidates:
        verdict = probe.try_mode(mode)
        if verdict.get("ok"):
            return mode, {"tried": tried, "facts": verdict.get("facts", {})}
        tried[mode] = str(verdict.get("error", "failed"))
        if requested != "auto":
            raise fail_closed.Refusal(
                f"isolation {mode} cannot be used here: {tried[mode]}; "
                "choose another with ANALYST_ENV_ISOLATION (--isolation)"
            )
    raise fail_closed.no_isolation(tried)


# ── zygote side ─────────────────────────────────────────────────────────────
def enter_zygote(
    mode: Mode, scratch_dir: str, package_dir: str, hidden: Sequence[str] = ()
) -> list[str]:
    """Confine the (warm, single-threaded) zygote before it forks anything.

    Returns:
        The host paths kernels can read: what the private root exposes, or in
        mode ``landlock`` the read-only rule paths (none in mode ``none``).

    Raises:
        OSError: A namespace could not be created (the mode is not available).
    """
    if mode == "none":
        return []
    hidden = [*hidden, *rootview.venv_strays()]
    if mode == "landlock":
        procctl.set_dumpable(False)
        return landlock.plan(rootview.exposed_paths(package_dir), [package_dir, *hidden])
    if mode == "userns":
        uid, gid = os.getuid(), os.getgid()
        sc.unshare(sc.CLONE_NEWUSER)
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
        with open("/proc/self/uid_map", "w") as f:
            f.write(f"0 {uid} 1")
        with open("/proc/self/gid_map", "w") as f:
            f.write(f"0 {gid} 1")
    return rootview.enter(
        scratch_dir, package_dir, in_user_namespace=mode == "userns", hidden=list(hidden)
    )


def enter_pid_namespace(control_fd: int) -> None:
    """Serve the rest of the zygote's life as PID 1 of a new PID namespace, with its own ``/proc``.

    Kernels are forked into this namespace, so their ``/proc`` lists only the
    namespace's processes: no host process (the server's ``--token`` command line,
    other servers, other users) is visible or can be signalled, and ``kill -9 -1``
    reaches the namespace only. The new ``/proc`` is mounted with
    ``hidepid=invisible``, so a kernel under a per-slot uid sees only its own
    processes; and when this PID 1 exits the kernel kills every process left
    inside, which ends all episodes of a zygote that died.

    ``unshare(CLONE_NEWPID)`` moves only later children, so this forks: the
    caller (the process the server started) waits for the namespace's first
    process and exits with its status; it closes its copy of the control socket
    first, so the server still sees the zygote end when PID 1 does. Only the
    child returns.

    Raises:
        OSError: The namespace or its ``/proc`` could not be created.
    """
    sc.unshare(sc.CLONE_NEWPID)
    pid = os.fork()
    if pid:
        os.close(control_fd)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _, status = os.waitpid(pid, 0)
        os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)
    procctl.set_parent_death_signal(signal.SIGKILL)
    sc.mount(
        "proc", "/proc", "proc", sc.MS_NOSUID | sc.MS_NODEV | sc.MS_NOEXEC, "hidepid=invisible"
    )


# ── child side ──────────────────────────────────────────────────────────────
def confine_child(
    mode: Mode,
    slot: str,
    uid: int | None,
    sizing: Sizing,
    seccomp_filter: bytes | None,
    readable: Sequence[str] = (),
) -> None:
    """Isolate this freshly forked kernel; called before it starts any thread.

    Args:
        mode: The backend's isolation mode.
        slot: The slot directory (its ``tmp`` becomes ``/tmp``).
        uid: The per-slot uid (``full`` mode) or ``None``.
        sizing: The episode's resources.
        seccomp_filter: The program from ``seccomp.build_filter`` (prebuilt in
            the zygote), or ``None`` where the architecture has none.
        readable: Mode ``landlock``: the read-only rule paths (``enter_zygote``).

    Raises:
        OSError: A step failed; the kernel must not run unconfined.
    """
    if mode in NAMESPACE_MODES:
        sc.unshare(sc.CLONE_NEWNET | sc.CLONE_NEWNS | sc.CLONE_NEWIPC | sc.CLONE_NEWUTS)
        sc.mount(None, "/", None, sc.MS_REC | sc.MS_SLAVE)
        only_own_slot(slot)
        tmp = os.path.join(slot, "tmp")
        sc.mount(tmp, "/tmp", None, sc.MS_BIND)
        if os.path.isdir("/dev/shm"):
            sc.mount(tmp, "/dev/shm", None, sc.MS_BIND)
        socket.sethostname("sandbox")
        loopback_up()
    if uid is not None and uses_slot_uids(mode):
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)  # drops every capability
        set_limit(resource.RLIMIT_NPROC, sizing.pids)
    elif mode == "userns" or (mode == "landlock" and os.geteuid() == 0):
        drop_capabilities()
    # The address space already mapped (interpreter, numpy, duckdb...) is mostly
    # shared and untouched, so the backstop allows ``memory_mb`` beyond it.
    set_limit(resource.RLIMIT_AS, mapped_bytes() + sizing.memory_mb * 1024 * 1024)
    set_limit(resource.RLIMIT_FSIZE, sizing.disk_mb * 1024 * 1024)
    set_limit(resource.RLIMIT_NOFILE, NOFILE_LIMIT)
    set_limit(resource.RLIMIT_CPU, CPU_TIME_LIMIT_S)
    os.umask(0o077)
    seccomp.set_no_new_privs()
    if mode in NAMESPACE_MODES:
        # Kernels of one zygote share its PID namespace (and in ``userns`` one uid):
        # Landlock's scoping keeps each from signalling, tracing or reading the memory
        # of the others and of the zygote, and from their abstract unix sockets.
        procctl.set_dumpable(False)
        if landlock.abi() >= 6:
            landlock.restrict_scope()
        if mode == "userns" and landlock.abi() >= 1:
            landlock.restrict_proc_writes()  # its zygote's and neighbours' /proc are its uid's
    if mode == "landlock":
        if seccomp_filter is None or not seccomp.supported():
            # Without a network namespace, only the socket filter keeps a kernel off the
            # host's network and only the IPC filter off the host's System V IPC.
            raise OSError(
                f"no seccomp filter for architecture {platform.machine()}: landlock mode "
                "needs it to refuse sockets and IPC (x86_64, aarch64)"
            )
        procctl.set_dumpable(
            False
        )  # fork keeps the zygote's flag; said again so it never depends on that
        landlock.restrict(list(readable), [slot])
    if seccomp_filter is not None:
        seccomp.install(seccomp_filter)
        if mode not in NAMESPACE_MODES and seccomp.supported():
            seccomp.install(seccomp.build_socket_filter())
            seccomp.install(seccomp.build_ipc_filter())


def protections(mode: Mode) -> dict[str, bool | str]:
    """What ``confine_child`` and the zygote's view provide in ``mode`` (cgroups not included)."""
    ns = mode in NAMESPACE_MODES
    return {
        "isolation": mode,
        "network_namespace": ns,
        "mount_namespace": ns,
        "pid_namespace": ns,
        "private_root": ns,
        "tmpfs_workdir": ns,
        "per_slot_uid": uses_slot_uids(mode),
        "landlock": f"ABI {landlock.abi()}" if mode == "landlock" else False,
        "network": "loopback only (own namespace)"
        if ns
        else ("AF_UNIX only" if mode == "landlock" else "host"),
        "no_new_privs": True,
        "seccomp": seccomp.supported(),
        "rlimits": "AS,FSIZE,NOFILE,CPU" + (",NPROC" if uses_slot_uids(mode) else ""),
        "cgroup_tree_hidden": mode != "none",
    }
