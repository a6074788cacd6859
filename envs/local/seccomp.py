"""A seccomp deny-list for episode kernels, built as raw BPF (no libseccomp needed).

Model code runs as an unprivileged uid with ``no_new_privs``, so most of these
calls would fail anyway; the filter is the second wall. It denies, with
``EPERM``: debugging other processes (``ptrace``, ``process_vm_*``), changing
mounts or namespaces (``mount``, ``umount2``, ``pivot_root``, ``chroot``,
``unshare``, ``setns``, the new mount API, and ``clone`` with any
``CLONE_NEW*`` flag), kernel keyrings, ``bpf``, ``perf_event_open``,
``userfaultfd``, ``io_uring`` (its operations run in kernel workers, beyond
this filter), ``pidfd_getfd``, ``process_madvise``, ``kcmp``, module
loading, ``kexec``, ``reboot`` and swap control.
``clone3`` gets ``ENOSYS`` (its flags are in memory, out of BPF's reach), which
makes glibc fall back to ``clone``. On x86_64, x32-ABI calls are denied too.

Building the program costs microseconds; loading it is one ``prctl`` (about
0.1 ms). A filter applies to the calling thread and the threads and processes
it creates afterwards, so the kernel loads it before starting any thread.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}

# name: (x86_64, aarch64)
_DENIED: dict[str, tuple[int, int]] = {
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "unshare": (272, 97),
    "setns": (308, 268),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "bpf": (321, 280),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "reboot": (169, 142),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "open_by_handle_at": (304, 265),
    # io_uring performs its operations in kernel workers, outside this filter's view.
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    # Reaching into other processes: their file descriptors, memory advice, kernel objects.
    "pidfd_getfd": (438, 438),
    "process_madvise": (440, 440),
    "kcmp": (312, 272),
}
_CLONE = (56, 220)
_CLONE3 = (435, 435)
_NAMESPACE_FLAGS = (
    0x7E020000  # CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
)
_X32_BIT = 0x40000000

_BPF_LD_W_ABS = 0x20
_BPF_JEQ_K = 0x15
_BPF_JGE_K = 0x35
_BPF_JSET_K = 0x45
_BPF_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_RET_KILL_PROCESS = 0x80000000

_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


def denied_syscalls() -> list[str]:
    """Names of the calls the filter denies outright (``clone`` is denied by flags)."""
    return sorted(_DENIED) + ["clone(CLONE_NEW*)", "clone3 (ENOSYS)"]


def supported() -> bool:
    """Whether this architecture has a filter."""
    return platform.machine() in _AUDIT_ARCH


def _architecture() -> tuple[str, int]:
    """This machine's name and its column in the syscall tables.

    Raises:
        OSError: The architecture is not supported.
    """
    machine = platform.machine()
    if machine not in _AUDIT_ARCH:
        raise OSError(errno.ENOSYS, f"no seccomp filter for architecture {machine}")
    return machine, 0 if machine == "x86_64" else 1


def build_filter() -> bytes:
    """The BPF program for this architecture, as packed ``sock_filter`` structs.

    Raises:
        OSError: The architecture is not supported.
    """
    machine, column = _architecture()
    denied = sorted({numbers[column] for numbers in _DENIED.values()})
    program: list[tuple[int, int, int, int]] = []

    def op(code: int, k: int, jt: int = 0, jf: int = 0) -> None:
        program.append((code, jt, jf, k))

    # Layout: checks..., [ALLOW], [EPERM], [ENOSYS]; jumps are relative to the next instruction.
    op(_BPF_LD_W_ABS, 4)  # arch
    op(_BPF_JEQ_K, _AUDIT_ARCH[machine], jt=1)
    op(_BPF_RET_K, _RET_KILL_PROCESS)
    op(_BPF_LD_W_ABS, 0)  # syscall number
    checks: list[tuple[int, int, str]] = []  # (code, k, target)
    if machine == "x86_64":
        checks.append((_BPF_JGE_K, _X32_BIT, "eperm"))
    checks += [(_BPF_JEQ_K, nr, "eperm") for nr in denied]
    checks.append((_BPF_JEQ_K, _CLONE3[column], "enosys"))
    first_check = len(program)
    n_checks = len(checks)
    # After the checks: "jeq clone" (jf -> allow), "ld arg0", "jset flags" (jt -> eperm),
    # allow, eperm, enosys
    clone_at = first_check + n_checks
    allow_at = clone_at + 3
    targets = {"allow": allow_at, "eperm": allow_at + 1, "enosys": allow_at + 2}
    for i, (code, k, target) in enumerate(checks):
        here = first_check + i
        op(code, k, jt=targets[target] - here - 1)
    op(_BPF_JEQ_K, _CLONE[column], jf=targets["allow"] - clone_at - 1)
    op(_BPF_LD_W_ABS, 16)  # low 32 bits of args[0] (little-endian)
    op(_BPF_JSET_K, _NAMESPACE_FLAGS, jt=targets["eperm"] - (clone_at + 2) - 1)
    op(_BPF_RET_K, _RET_ALLOW)
    op(_BPF_RET_K, _RET_ERRNO | errno.EPERM)
    op(_BPF_RET_K, _RET_ERRNO | errno.ENOSYS)
    assert all(0 <= jt < 256 and 0 <= jf < 256 for _, jt, jf, _ in program)
    return b"".join(struct.pack("=HBBI", code, jt, jf, k) for code, jt, jf, k in program)


def set_no_new_privs() -> None:
    """Forbid gaining privileges through exec (setuid binaries, file capabilities)."""
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"PR_SET_NO_NEW_PRIVS: {os.strerror(err)}")


def install(program: bytes) -> None:
    """Load ``program`` (from ``build_filter``) for this thread and its future children.

    Requires ``no_new_privs`` (or ``CAP_SYS_ADMIN``).
    """
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_char_p))
    if _libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"PR_SET_SECCOMP: {os.strerror(err)}")


_SOCKET = (41, 198)
_AF_UNIX = 1


def build_socket_filter() -> bytes:
    """A second program, for kernels without a network namespace: ``socket()`` only for ``AF_UNIX``.

    Without their own network namespace (``landlock`` isolation) kernels share
    the host's network; TCP is also refused by Landlock, but UDP, raw and
    netlink sockets are not, so every family but local sockets is refused here
    (``EAFNOSUPPORT``, what a kernel without that family answers).

    Raises:
        OSError: The architecture is not supported.
    """
    machine, column = _architecture()
    program = [
        (_BPF_LD_W_ABS, 0, 0, 4),  # arch
        (_BPF_JEQ_K, 1, 0, _AUDIT_ARCH[machine]),
        (_BPF_RET_K, 0, 0, _RET_KILL_PROCESS),
        (_BPF_LD_W_ABS, 0, 0, 0),  # syscall number
        (_BPF_JEQ_K, 0, 2, _SOCKET[column]),  # not socket() -> allow
        (_BPF_LD_W_ABS, 0, 0, 16),  # args[0]: the address family
        (_BPF_JEQ_K, 0, 1, _AF_UNIX),  # AF_UNIX -> allow, else refuse
        (_BPF_RET_K, 0, 0, _RET_ALLOW),
        (_BPF_RET_K, 0, 0, _RET_ERRNO | errno.EAFNOSUPPORT),
    ]
    return b"".join(struct.pack("=HBBI", code, jt, jf, k) for code, jt, jf, k in program)


_HOST_IPC: dict[str, tuple[int, int]] = {
    "shmget": (29, 194),
    "shmat": (30, 196),
    "shmctl": (31, 195),
    "shmdt": (67, 197),
    "semget": (64, 190),
    "semop": (65, 193),
    "semctl": (66, 191),
    "semtimedop": (220, 192),
    "msgget": (68, 186),
    "msgsnd": (69, 189),
    "msgrcv": (70, 188),
    "msgctl": (71, 187),
    "mq_open": (240, 180),
    "mq_unlink": (241, 181),
    "mq_timedsend": (242, 182),
    "mq_timedreceive": (243, 183),
    "mq_notify": (244, 184),
    "mq_getsetattr": (245, 185),
}
"""System V IPC and POSIX message queues: objects named in the IPC namespace, not in a file."""


def build_ipc_filter() -> bytes:
    """A third program, for kernels without an IPC namespace: no System V IPC, no message queues.

    Without their own IPC namespace (``landlock`` isolation) kernels share the
    host's, where Landlock does not reach: a shared memory segment, semaphore set or
    message queue a kernel creates outlives its episode and the server (the process
    tree kill cannot reach it), holds memory that no limit counts once detached, and
    is there for the next episode, or another program of the same uid, to open. Each
    call answers ``ENOSYS``, what a kernel built without System V IPC answers.

    Raises:
        OSError: The architecture is not supported.
    """
    machine, column = _architecture()
    numbers = sorted({pair[column] for pair in _HOST_IPC.values()})
    program = [
        (_BPF_LD_W_ABS, 0, 0, 4),  # arch
        (_BPF_JEQ_K, 1, 0, _AUDIT_ARCH[machine]),
        (_BPF_RET_K, 0, 0, _RET_KILL_PROCESS),
        (_BPF_LD_W_ABS, 0, 0, 0),  # syscall number
        # each match jumps over the remaining checks and the allow, to ENOSYS
        *((_BPF_JEQ_K, len(numbers) - i, 0, nr) for i, nr in enumerate(numbers)),
        (_BPF_RET_K, 0, 0, _RET_ALLOW),
        (_BPF_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS),
    ]
    return b"".join(struct.pack("=HBBI", code, jt, jf, k) for code, jt, jf, k in program)
