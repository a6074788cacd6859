"""Per-server ranges of slot uids, claimed so that two servers on one host never share one.

Episode kernels run under per-slot uids in ``full`` isolation, and a uid is
what stands between two episodes: a kernel can signal, and read the files of,
any process with its uid, and ``RLIMIT_NPROC`` counts per uid. Two servers that
used the same uids would see each other's episodes, so each claims a range for
its lifetime: one lock file per block of ``RANGE_STRIDE`` uids it touches
(so overlapping ranges conflict), locked with ``flock`` (released by the
kernel when the server exits, however it exits), holding the owner's pid.

A range is ``[base, base + size)``. Without a configured base the first free one
of ``MAX_RANGES`` candidates, ``DEFAULT_BASE + k * RANGE_STRIDE``, is taken; a
configured base (``ANALYST_ENV_UID_BASE``) is claimed or refused.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass

from analyst_env.envs.local.fail_closed import Refusal

RANGE_STRIDE = 65_536
DEFAULT_BASE = 23 * RANGE_STRIDE  # 1,507,328: above any uid a distribution hands out
MAX_RANGES = 256
LOCK_DIR = "/run/analyst-env/uid-ranges"


class UidRangeBusy(RuntimeError):
    """No uid range could be claimed (the configured one, or every candidate, is held)."""


@dataclass
class UidRange:
    """A claimed range of slot uids; ``release()`` (or the process's exit) frees it."""

    base: int
    size: int
    _fds: list[int]

    @property
    def uids(self) -> range:
        """The uids of the range."""
        return range(self.base, self.base + self.size)

    def release(self) -> None:
        """Give the range back. Idempotent."""
        for fd in self._fds:
            os.close(fd)
        self._fds = []


def _blocks(base: int, size: int) -> range:
    """The ``RANGE_STRIDE``-aligned blocks a range touches: each has one lock, so overlaps
    conflict."""
    return range(base // RANGE_STRIDE, (base + size - 1) // RANGE_STRIDE + 1)


def _lock_path(lock_dir: str, block: int) -> str:
    return os.path.join(lock_dir, f"block-{block * RANGE_STRIDE}.lock")


def _try_claim(base: int, size: int, lock_dir: str) -> UidRange | None:
    fds: list[int] = []
    for block in _blocks(base, size):
        fd = os.open(_lock_path(lock_dir, block), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            for held in fds:
                os.close(held)
            return None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        fds.append(fd)
    return UidRange(base, size, fds)


def _holders(base: int, size: int, lock_dir: str) -> str:
    pids = set()
    for block in _blocks(base, size):
        try:
            with open(_lock_path(lock_dir, block)) as f:
                pids.add(f.read().strip() or "?")
        except OSError:
            pass
    return "pid " + ", ".join(sorted(pids)) if pids else "another server"


def claim(size: int, base: int | None = None, lock_dir: str = LOCK_DIR) -> UidRange:
    """Claim ``size`` consecutive slot uids for this process.

    Args:
        size: How many uids (the backend's slot count).
        base: The first uid to claim; ``None`` takes the first free candidate.
        lock_dir: Where the lock files live (shared by every server of the host).

    Raises:
        UidRangeBusy: ``base`` is held by another server, or every candidate is.
        Refusal: ``lock_dir`` cannot be created or written (a read-only root filesystem).
        ValueError: ``size`` exceeds ``RANGE_STRIDE`` without an explicit ``base``.
    """
    try:
        os.makedirs(lock_dir, mode=0o755, exist_ok=True)
        if not os.access(lock_dir, os.W_OK):
            raise PermissionError(f"{lock_dir} is not writable")
    except OSError as exc:
        # A read-only root (`docker run --read-only`) has no writable /run: one line, not a
        # traceback, saying what to mount there.
        raise Refusal(
            f"the uid-range locks of isolation full cannot be kept in {lock_dir} ({exc}); "
            "mount a writable directory there, shared by every server of the host (docker: "
            f"-v analyst-env-uid-ranges:{lock_dir}; Kubernetes: a hostPath volume)"
        ) from None
    if base is not None:
        claimed = _try_claim(base, size, lock_dir)
        if claimed is None:
            raise UidRangeBusy(
                f"slot uids {base}..{base + size - 1} overlap a range held by "
                f"{_holders(base, size, lock_dir)}; give each server its own "
                "ANALYST_ENV_UID_BASE, or leave it unset to pick a free range"
            )
        return claimed
    if size > RANGE_STRIDE:
        raise ValueError(
            f"{size} slots need an explicit uid base (automatic ranges hold {RANGE_STRIDE})"
        )
    for k in range(MAX_RANGES):
        claimed = _try_claim(DEFAULT_BASE + k * RANGE_STRIDE, size, lock_dir)
        if claimed is not None:
            return claimed
    raise UidRangeBusy(
        f"all {MAX_RANGES} slot uid ranges from {DEFAULT_BASE} are held by running servers"
    )
