"""Keep a kernel a child subreaper: a seccomp program that refuses ``PR_SET_CHILD_SUBREAPER``.

A kernel makes itself a child subreaper so that everything its cells start stays in
its process tree, however it detaches (``setsid``, double forks): where the episode
has no cgroup and no uid of its own (``userns``, ``landlock`` without root), that
tree is the only way to find, and kill, the agent's processes before its answer is
verified. A cell could clear the flag with ``prctl(PR_SET_CHILD_SUBREAPER, 0)`` and
then orphan a process out of the tree; this filter, loaded by the kernel after it
set the flag, answers that ``prctl`` with ``EPERM``. It stacks on the deny-list
(``seccomp``), so it needs the ``no_new_privs`` that one set.
"""

from __future__ import annotations

import errno
import platform
import struct

from analyst_env.envs.local import seccomp

_BPF_LD_W_ABS = 0x20
_BPF_JEQ_K = 0x15
_BPF_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_PR_SET_CHILD_SUBREAPER = 36
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_PRCTL = {"x86_64": 157, "aarch64": 167}


def build_filter() -> bytes:
    """The BPF program: ``prctl(PR_SET_CHILD_SUBREAPER, ...)`` fails with ``EPERM``.

    Raises:
        OSError: The architecture is not supported.
    """
    machine = platform.machine()
    if machine not in _AUDIT_ARCH:
        raise OSError(errno.ENOSYS, f"no seccomp filter for architecture {machine}")
    program = [
        (_BPF_LD_W_ABS, 0, 0, 4),  # arch (another one is the deny-list's to refuse)
        (_BPF_JEQ_K, 0, 5, _AUDIT_ARCH[machine]),  # no: allow
        (_BPF_LD_W_ABS, 0, 0, 0),  # syscall number
        (_BPF_JEQ_K, 0, 3, _PRCTL[machine]),  # not prctl: allow
        (_BPF_LD_W_ABS, 0, 0, 16),  # low 32 bits of args[0], the option
        (_BPF_JEQ_K, 0, 1, _PR_SET_CHILD_SUBREAPER),  # another option: allow
        (_BPF_RET_K, 0, 0, _RET_ERRNO | errno.EPERM),
        (_BPF_RET_K, 0, 0, _RET_ALLOW),
    ]
    return b"".join(struct.pack("=HBBI", code, jt, jf, k) for code, jt, jf, k in program)


def lock() -> None:
    """Load the filter for this process and everything it starts.

    Raises:
        OSError: The architecture is not supported, or the filter could not be loaded
            (no ``no_new_privs``).
    """
    seccomp.install(build_filter())
