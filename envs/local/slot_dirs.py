"""Episode slots: the directory each kernel works in (``work``) and keeps its ``/tmp`` in.

In the namespace modes a slot is a size-limited tmpfs owned by the episode's uid, mode
0700, mounted where the zygote's private root shows slots (``rootview.SLOTS_DIR``);
otherwise it is a plain host directory under the backend's root that only the slot's uid
can enter. The zygote makes and removes them (``zygote.py``), as does the start-up probe
that tries each mode for real (``probe.py``).
"""

from __future__ import annotations

import os
import shutil

from analyst_env.envs.local import rootview
from analyst_env.envs.local import syscalls as sc
from analyst_env.envs.local.isolation import NAMESPACE_MODES, Mode, uses_slot_uids


def slots_dir(mode: Mode, host_root: str) -> str:
    """Where slot directories live, as the zygote and its kernels see it."""
    return rootview.SLOTS_DIR if mode in NAMESPACE_MODES else os.path.join(host_root, "slots")


def make_slot(mode: Mode, host_root: str, name: str, uid: int | None, disk_mb: int) -> str:
    """Create an episode slot (``work`` and ``tmp``); return its directory.

    In the namespace modes the slot is a tmpfs of ``disk_mb`` owned by ``uid``,
    mode 0700; otherwise a plain host directory.
    """
    path = os.path.join(slots_dir(mode, host_root), name)
    if mode not in NAMESPACE_MODES and uid is not None:
        # Host directories: a slot uid must be able to pass through to its own slot.
        os.makedirs(os.path.dirname(path), mode=0o711, exist_ok=True)
        for parent in (host_root, os.path.dirname(path)):
            os.chmod(parent, 0o711)
    os.makedirs(path, mode=0o700)
    if mode in NAMESPACE_MODES:
        owner = f",uid={uid},gid={uid}" if uid is not None else ""
        sc.mount(
            "tmpfs", path, "tmpfs", sc.MS_NOSUID | sc.MS_NODEV, f"size={disk_mb}m,mode=0700{owner}"
        )
    os.makedirs(os.path.join(path, "work"), mode=0o755)  # the slot itself is 0700
    os.makedirs(os.path.join(path, "tmp"), mode=0o700)
    if uid is not None and uses_slot_uids(mode):
        for sub in ("work", "tmp"):
            os.chown(os.path.join(path, sub), uid, uid)
        if mode not in NAMESPACE_MODES:
            os.chown(path, uid, uid)
    return path


def remove_slot(mode: Mode, host_root: str, name: str) -> None:
    """Unmount (lazily) and remove a slot; its processes must be dead. Idempotent."""
    path = os.path.join(slots_dir(mode, host_root), name)
    if mode in NAMESPACE_MODES:
        try:
            sc.umount(path, sc.MNT_DETACH)
        except OSError:
            pass
        try:
            os.rmdir(path)
        except OSError:
            pass
    else:
        shutil.rmtree(path, ignore_errors=True)
