"""Landlock: unprivileged filesystem, TCP and signal confinement for kernels without namespaces.

Where the server may not create namespaces (Docker's default seccomp profile,
Kubernetes' ``restricted`` pods, hub Spaces running as uid 1000), Landlock still
works: any process can restrict itself, and its children, to a set of
allowed accesses. A kernel in ``landlock`` isolation restricts itself to:

* read and execute beneath the system trees, the interpreter and its package
  directories (``rootview.exposed_paths``), except the server's own package and
  state, which are left out entry by entry (Landlock has no deny rule, so a
  directory holding a hidden one is allowed child by child);
* read beneath ``/proc`` and ``/sys``, but in ``/sys/fs/cgroup`` files only (a
  runtime reads its own limits there; no directory of the tree can be listed);
  read and write on ``/dev/null``,
  ``/dev/zero``, ``/dev/full``, ``/dev/random`` and ``/dev/urandom``;
* everything beneath its own slot directory (working directory and ``tmp``);
* no TCP bind or connect at all (ABI 4);
* no signal to, and no abstract unix socket of, any process outside its own
  domain (ABI 6): not the server, the zygote or another episode.

Anything else (``/tmp``, the home directories, other slots, the task cache)
is refused with ``EACCES``. Rights this kernel's Landlock ABI does not know are
simply not handled; ``abi()`` tells which ABI is in force.

Linux >= 6.12 (Landlock ABI 6): below it signals and abstract sockets cannot be
scoped, and ``restrict`` refuses rather than confine a kernel that could signal the
server. The syscall numbers are the same on every architecture.
"""

from __future__ import annotations

import ctypes
import os
import struct

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
_FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | (1 << 14) | (1 << 15)  # + TRUNCATE, IOCTL_DEV
READ_ONLY = EXECUTE | READ_FILE | READ_DIR
_NET_TCP = (1 << 0) | (1 << 1)  # BIND_TCP | CONNECT_TCP
_SCOPES = (1 << 0) | (1 << 1)  # ABSTRACT_UNIX_SOCKET | SIGNAL
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _syscall(number: int, *args) -> int:
    result = _libc.syscall(number, *args)
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"landlock syscall {number}: {os.strerror(err)}")
    return result


def abi() -> int:
    """The Landlock ABI this kernel offers; 0 when Landlock is unavailable or disabled."""
    try:
        return _syscall(
            _CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION)
        )
    except OSError:
        return 0


def _handled_fs(version: int) -> int:
    return next(mask for v, mask in sorted(_FS_BY_ABI.items(), reverse=True) if version >= v)


def plan(exposed: list[str], hidden: list[str]) -> list[str]:
    """The read-only rule paths: ``exposed`` trees, with every ``hidden`` path inside one cut out.

    A tree that holds a hidden path is replaced by its entries, recursively along
    the hidden path, so the rules reach everything but it. An exposed tree that
    lies inside a hidden one (an editable checkout's ``.venv``) stays whole, as
    the private root view keeps it.
    """
    hidden = [os.path.realpath(h) for h in hidden if h]
    rules: list[str] = []

    def inside(path: str, root: str) -> bool:
        return path == root or path.startswith(root.rstrip("/") + os.sep)

    def add(path: str, cuts: list[str]) -> None:
        if any(path == h for h in cuts):
            return
        below = [h for h in cuts if inside(h, path)]
        if not below:
            rules.append(path)
            return
        try:
            entries = os.listdir(path)
        except OSError:
            return
        for entry in sorted(entries):
            add(os.path.join(path, entry), below)

    for root in exposed:
        root = os.path.realpath(root)
        add(root, [h for h in hidden if inside(h, root)])
    return rules


def restrict_scope() -> None:
    """Only scope this process (ABI 6): no signals to, and no abstract unix sockets of, processes
    outside it.

    Filesystem and network access are left as they are (the namespace modes
    already confine them); the domain also bars tracing and reading the memory
    of processes outside it.

    Raises:
        OSError: Landlock below ABI 6, or a step was refused.
    """
    attr = struct.pack("=3Q", 0, 0, _SCOPES)
    ruleset = _syscall(_CREATE_RULESET, attr, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    try:
        _syscall(_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)


def _allow_beneath(ruleset: int, path: str, access: int) -> None:
    """Add to ``ruleset`` a rule allowing ``access`` beneath ``path`` (on a file, the rights a
    file can have); a path that does not exist (or a dangling link) needs no rule."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not os.path.isdir(path):
            access &= _FILE_ONLY
        rule = struct.pack("=Qi", access, fd)
        _syscall(
            _ADD_RULE,
            ctypes.c_int(ruleset),
            ctypes.c_int(_RULE_PATH_BENEATH),
            rule,
            ctypes.c_uint32(0),
        )
    finally:
        os.close(fd)


def restrict_proc_writes() -> None:
    """Open no file beneath ``/proc`` for writing (ABI 1); everything else stays as it was.

    In ``userns`` every kernel has its zygote's uid, so the ``/proc/<pid>`` files of the
    zygote and of the other episodes' kernels are its own by ownership: it could set their
    ``oom_score_adj`` to 1000 (the OOM killer's first victims) or their ``autogroup`` nice to
    19. Only writing files is handled here, and it is allowed beneath every entry of the
    root but ``/proc``, which a kernel has no reason to write.

    Raises:
        OSError: Landlock is unavailable or a step was refused.
    """
    attr = struct.pack("=Q", WRITE_FILE)
    ruleset = _syscall(_CREATE_RULESET, attr, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    try:
        for entry in sorted(os.listdir("/")):
            if entry != "proc":
                _allow_beneath(ruleset, "/" + entry, WRITE_FILE)
        _syscall(_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)


CGROUP_TREE = "/sys/fs/cgroup"


def sys_paths(root: str = "/sys", hidden: str = CGROUP_TREE) -> list[str]:
    """``/sys`` as rule paths, without ``hidden``: its siblings and theirs up to ``root``.

    Landlock grants access beneath a path, so leaving one directory out means naming
    everything beside it on the way down. The cgroup tree names every server's
    cgroups, pids and slot uids on the host; a kernel needs none of it.
    """
    paths: list[str] = []
    cut = hidden
    while cut != root and cut.startswith(root + "/"):
        parent = os.path.dirname(cut)
        try:
            entries = sorted(os.listdir(parent))
        except OSError:
            entries = []
        paths += [os.path.join(parent, e) for e in entries if os.path.join(parent, e) != cut]
        cut = parent
    return paths if hidden.startswith(root + "/") else [root]


def restrict(read_only: list[str], writable: list[str]) -> int:
    """Restrict this process (and what it starts) to the rules above; returns the ABI in force.

    Must be called after ``no_new_privs`` and before any thread starts.

    Args:
        read_only: Paths to allow read and execute beneath (from ``plan``), plus
            ``/proc`` and ``/sys`` (in its cgroup tree, files only: ``sys_paths``).
        writable: Paths to allow everything beneath (the slot directory).

    Raises:
        OSError: Landlock is unavailable, below ABI 6 (no signal scoping), or a
            step was refused (the kernel must not run unconfined).
    """
    version = abi()
    if version < 1:
        raise OSError("Landlock is not available in this kernel")
    if version < 6:
        # Without scoping, a kernel of the server's uid could kill the server and connect to
        # every abstract unix socket of the host (its network namespace is the host's).
        raise OSError(
            f"Landlock ABI {version} cannot scope signals and abstract unix sockets "
            "(ABI 6, Linux >= 6.12)"
        )
    fs = _handled_fs(version)
    fields = [fs]
    if version >= 4:
        fields.append(_NET_TCP)
    if version >= 6:
        fields.append(_SCOPES)
    attr = struct.pack(f"={len(fields)}Q", *fields)
    ruleset = _syscall(_CREATE_RULESET, attr, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    try:
        rules = [(p, READ_ONLY) for p in [*read_only, "/proc", *sys_paths()]]
        # The cgroup tree's files but not its directories: a runtime reads its own limits
        # (DuckDB's CPU quota at the path /proc/self/cgroup names), nothing lists the tree.
        rules.append((CGROUP_TREE, READ_FILE))
        rules += [(p, READ_FILE | WRITE_FILE | (fs & (1 << 15))) for p in _DEVICES]
        rules += [(p, fs) for p in writable]
        for path, access in rules:
            _allow_beneath(ruleset, path, access & fs)
        _syscall(_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)
    return version
