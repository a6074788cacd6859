"""Thin ctypes wrappers for the Linux calls Python 3.11 lacks: unshare, mount, pivot_root.

The sandbox's namespaces and private root are built from these. Each wrapper
raises ``OSError`` with the errno, like the ``os`` module does. Linux only;
``pivot_root`` knows the syscall numbers of x86_64 and aarch64.
"""

from __future__ import annotations

import ctypes
import os
import platform

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_RELATIME = 1 << 21
MS_PRIVATE = 1 << 18
MS_SLAVE = 1 << 19
MS_SHARED = 1 << 20
MNT_DETACH = 2

_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.unshare.argtypes = [ctypes.c_int]


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _b(value: str | None) -> bytes | None:
    return None if value is None else os.fsencode(value)


def unshare(flags: int) -> None:
    """Move this process into new namespaces (``CLONE_NEW*`` flags)."""
    _check(_libc.unshare(flags), f"unshare({flags:#x})")


def mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None
) -> None:
    """``mount(2)``."""
    _check(_libc.mount(_b(source), _b(target), _b(fstype), flags, _b(data)), f"mount {target}")


def umount(target: str, flags: int = 0) -> None:
    """``umount2(2)``."""
    _check(_libc.umount2(_b(target), flags), f"umount {target}")


def pivot_root(new_root: str, put_old: str) -> None:
    """``pivot_root(2)``: make ``new_root`` this mount namespace's root.

    Raises:
        OSError: The call failed, or the architecture's syscall number is unknown.
    """
    number = _PIVOT_ROOT.get(platform.machine())
    if number is None:
        raise OSError(38, f"pivot_root: unsupported architecture {platform.machine()}")
    _check(_libc.syscall(number, _b(new_root), _b(put_old)), "pivot_root")


def statvfs_mount_flags(path: str) -> int:
    """The ``MS_*`` flags a bind of ``path`` must keep (a user namespace may not clear them)."""
    f_flag = os.statvfs(path).f_flag
    flags = 0
    for st, ms in (
        (os.ST_RDONLY, MS_RDONLY),
        (os.ST_NOSUID, MS_NOSUID),
        (os.ST_NODEV, MS_NODEV),
        (os.ST_NOEXEC, MS_NOEXEC),
        (os.ST_NOATIME, MS_NOATIME),
        (os.ST_NODIRATIME, MS_NODIRATIME),
        (os.ST_RELATIME, MS_RELATIME),
    ):
        if f_flag & st:
            flags |= ms
    return flags
