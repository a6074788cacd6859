"""The single steps of confining a freshly forked kernel, each a system call or two.

``isolation.confine_child`` takes these in the measured order (namespaces and mounts
while still privileged, then uid, rlimits, ``no_new_privs`` and seccomp); here is only
how each is done: bring up the loopback interface of a new network namespace, cover
``/slots`` so that only the kernel's own slot shows, drop every capability, read the
address space already mapped, and set an rlimit no higher than its hard limit.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import resource
import socket
import struct

from analyst_env.envs.local import rootview
from analyst_env.envs.local import syscalls as sc

_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
_CAPABILITY_VERSION_3 = 0x20080522


def loopback_up() -> None:
    """Bring up ``lo`` in this kernel's new network namespace (its only network)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, _SIOCGIFFLAGS, ifreq))[1]
        fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP))


def only_own_slot(slot: str) -> None:
    """In this kernel's mount namespace, ``/slots`` holds its own slot and no other.

    Slots are mounted for the zygote under one shared ``/slots``; where kernels
    share a uid (``userns``) permissions would not keep one out of another's, so
    the directory is covered by an empty tmpfs and only the own slot bound back.
    """
    keep = os.open(slot, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        sc.mount(
            "tmpfs",
            rootview.SLOTS_DIR,
            "tmpfs",
            sc.MS_NOSUID | sc.MS_NODEV | sc.MS_NOEXEC,
            "mode=0711,size=4k",
        )
        os.mkdir(slot, 0o711)
        sc.mount(f"/proc/self/fd/{keep}", slot, None, sc.MS_BIND)
    finally:
        os.close(keep)


def drop_capabilities() -> None:
    """Clear every capability set of this process (``capset`` with empty sets)."""
    header = struct.pack("Ii", _CAPABILITY_VERSION_3, 0)
    data = bytes(24)  # two zeroed {effective, permitted, inheritable} sets
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.capset(header, data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"capset: {os.strerror(err)}")


def mapped_bytes() -> int:
    """The address space this process has mapped (``VmSize``), in bytes; 0 if unknown."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def set_limit(which: int, value: int) -> None:
    """Set rlimit ``which`` (soft and hard) to ``value``, no higher than its hard limit."""
    soft, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, value))
