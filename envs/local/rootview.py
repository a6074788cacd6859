"""The zygote's private root: a read-only view of only what a kernel needs.

Episode kernels must be able to run Python with the image's packages, ``/bin/sh``
and the usual tools, but not read the server's source, its task catalogue (which
holds answers), other episodes' files or the server's home. Hiding by
permissions alone is not enough (most of those files are world-readable), so
the zygote, once warm, enters a new mount namespace and ``pivot_root``s into a
tmpfs that holds read-only bind mounts of exactly:

* ``/usr``, ``/etc`` and the ``/bin``, ``/lib*``, ``/sbin`` links or dirs;
* the interpreter's prefixes and every ``sys.path`` directory, except ones
  inside the server's own package directory (``.venv`` inside it is kept);
* ``/proc`` and ``/sys`` (another uid's ``/proc/<pid>`` details stay private),
  with ``/sys/fs/cgroup`` covered by an empty tmpfs (the host's tree names every
  server's cgroups, pids and slot uids);
* a minimal ``/dev`` (null, zero, full, random, urandom; a tmpfs ``/dev/shm``);
* ``/tmp`` (tmpfs; each kernel gets its slot's own ``tmp`` there) and
  ``/slots``, where the zygote mounts one size-limited tmpfs per episode slot.

The server's own package, its task cache and its state may still lie *inside* an
exposed directory: a ``pip install`` puts ``analyst_env`` in the very
site-packages kernels import pandas from. Each such hidden path is covered by an
empty read-only tmpfs, so ``import analyst_env.datasets`` (which could rebuild
every shipped task with its answer) fails inside the sandbox in every layout.
Whatever else lies at the top of the server's venv (a build folder, another install
of this package, a test server's state) is covered the same way (``venv_strays``).
Kernels keep the modules the zygote imported before it entered the view; they
can import nothing more of the server's.

Everything else on the host (``/work``, ``/root``, ``/home``, the dataset and
cache directories) does not exist inside. The intermediate directories of a
bind target (e.g. ``/root`` above a pyenv prefix) are the view's own, mode 0755,
so a per-slot uid can reach the prefix without seeing the rest of ``/root``.

Building the view costs a few milliseconds once per zygote. ``/slots`` is a
shared mount, so a slot the zygote unmounts also disappears from kernels'
(slave) copies of the namespace and its memory is freed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from analyst_env.envs.local import syscalls as sc

SLOTS_DIR = "/slots"
_SYSTEM_PATHS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_DEVICES = ("null", "zero", "full", "random", "urandom")


_RESERVED = ("/tmp", "/proc", "/sys", "/dev", SLOTS_DIR)
CGROUP_TREE = "/sys/fs/cgroup"
"""Covered by an empty tmpfs in the view, cut out of Landlock's rules: no kernel lists it."""


def _is_reserved(path: str) -> bool:
    """Paths the view provides itself: never bind the host's (e.g. a ``sys.path`` entry under
    /tmp)."""
    return any(path == r or path.startswith(r + os.sep) for r in _RESERVED)


def hidden_interpreter_paths() -> list[str]:
    """The interpreter's prefixes and site-packages that the view cannot show (under ``/tmp``...).

    Kernels import modules lazily long after the zygote started (IPython itself does
    when a cell runs), so an interpreter under a path the view provides itself would
    break every cell; the backend refuses to start instead.
    """
    import site

    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, *site.getsitepackages()}
    return sorted(p for p in (os.path.realpath(p) for p in paths) if _is_reserved(p))


def exposed_paths(package_dir: str) -> list[str]:
    """Host paths the view binds read-only, outermost first, without duplicates.

    Args:
        package_dir: The server's own package directory; nothing inside it is
            exposed except the interpreter's prefix (a ``.venv`` inside it).
    """
    package_dir = os.path.realpath(package_dir)
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    candidates = [*_SYSTEM_PATHS, *sorted(prefixes)]
    for entry in sys.path:
        if entry and os.path.isdir(entry):
            candidates.append(os.path.realpath(entry))
    chosen: list[str] = []
    for path in candidates:
        if not os.path.lexists(path) or _is_reserved(path):
            continue
        inside_package = path == package_dir or path.startswith(package_dir + os.sep)
        if inside_package and not any(path == p or path.startswith(p + os.sep) for p in prefixes):
            continue
        if os.path.islink(path) and path in _SYSTEM_PATHS:
            chosen.append(path)  # e.g. /bin -> usr/bin, recreated as a link
            continue
        real = os.path.realpath(path)
        if any(real == c or real.startswith(c.rstrip("/") + os.sep) for c in chosen):
            continue
        chosen.append(real)
    return chosen


_VENV_LAYOUT = frozenset(
    {"bin", "Scripts", "include", "Include", "lib", "Lib", "lib64", "share", "etc", "man"}
    | {"pyvenv.cfg", ".gitignore", "CACHEDIR.TAG", ".lock"}
)
"""What ``venv``, ``virtualenv`` and ``uv`` put at the top of a virtual environment."""


def venv_strays() -> list[str]:
    """Entries of the server's virtual environment that are no part of one: to be hidden.

    The view exposes the interpreter's prefix whole, and a venv is a directory people
    keep other things in (a build folder, another install of this package with its
    task catalogue, a test server's state); those would be readable by every kernel.
    An entry that holds a ``sys.path`` directory stays (an editable install's ``src``).
    """
    import site

    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.exec_prefix)}
    prefixes -= {os.path.realpath(sys.base_prefix), os.path.realpath(sys.base_exec_prefix)}
    needed = [os.path.realpath(p) for p in (*sys.path, *site.getsitepackages()) if p]
    strays = []
    for prefix in sorted(prefixes):
        try:
            entries = sorted(os.listdir(prefix))
        except OSError:
            continue
        for entry in entries:
            path = os.path.join(prefix, entry)
            holds_needed = any(n == path or n.startswith(path + os.sep) for n in needed)
            if entry in _VENV_LAYOUT or holds_needed:
                continue
            strays.append(path)
    return strays


def covered_paths(hidden: list[str], exposed: list[str]) -> list[str]:
    """The ``hidden`` paths that lie inside an ``exposed`` one (and so need covering); a path
    inside another covered one is left out: the outer cover hides it, and once mounted the
    inner one no longer exists to be covered."""
    covered: list[str] = []
    for path in sorted({os.path.realpath(p) for p in hidden if p}):
        if not os.path.lexists(path) or any(_within(path, c) for c in covered):
            continue
        if any(_within(path, e) for e in exposed):
            covered.append(path)
    return covered


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + os.sep)


def _cover(target: str) -> None:
    """Mount an empty, read-only tmpfs over ``target`` (an existing directory of the view), or
    the host's ``/dev/null`` over a file (on the view's ``nodev`` mounts it cannot be opened)."""
    if not os.path.isdir(target):
        sc.mount("/dev/null", target, None, sc.MS_BIND)
        sc.mount(None, target, None, sc.MS_REMOUNT | sc.MS_BIND | sc.MS_RDONLY | sc.MS_NOSUID)
        return
    sc.mount(
        "tmpfs", target, "tmpfs", sc.MS_NOSUID | sc.MS_NODEV | sc.MS_NOEXEC, "mode=0555,size=4k"
    )
    sc.mount(
        None, target, None, sc.MS_REMOUNT | sc.MS_RDONLY | sc.MS_NOSUID | sc.MS_NODEV | sc.MS_NOEXEC
    )


def _bind_readonly(source: str, target: str, *, recursive: bool = False) -> None:
    if os.path.isdir(source):
        os.makedirs(target, mode=0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
        open(target, "ab").close()
    keep = sc.statvfs_mount_flags(source)
    sc.mount(source, target, None, sc.MS_BIND | (sc.MS_REC if recursive else 0))
    sc.mount(None, target, None, sc.MS_REMOUNT | sc.MS_BIND | sc.MS_RDONLY | sc.MS_NOSUID | keep)
    if recursive:
        # A read-only remount covers one mount only: every submount (e.g. the
        # cgroup trees under /sys/fs/cgroup) is made read-only on its own.
        for point in _mounts_below(target):
            try:
                keep = sc.statvfs_mount_flags(point)
                sc.mount(
                    None,
                    point,
                    None,
                    sc.MS_REMOUNT | sc.MS_BIND | sc.MS_RDONLY | sc.MS_NOSUID | keep,
                )
            except OSError:
                sc.umount(point, sc.MNT_DETACH)  # cannot be made read-only: not shown at all


def _mounts_below(target: str) -> list[str]:
    """Mount points strictly below ``target`` in this mount namespace, outermost first."""
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].replace("\\040", " ")
            if point.startswith(target.rstrip("/") + "/"):
                points.append(point)
    return sorted(set(points), key=len)


def _hide_cgroup_tree(new_root: str) -> None:
    """Cover ``/sys/fs/cgroup`` with an empty read-only tmpfs.

    The host's cgroup tree names every server's cgroups (other servers' pids, their
    slot uids, sibling kernels' pids); a kernel needs none of it (the server applies
    the limits from outside), so it sees an empty directory.
    """
    target = new_root + CGROUP_TREE
    if os.path.isdir(target):
        sc.mount(
            "tmpfs",
            target,
            "tmpfs",
            sc.MS_RDONLY | sc.MS_NOSUID | sc.MS_NODEV | sc.MS_NOEXEC,
            "mode=0555,size=4k",
        )


def _bind_device(name: str, new_root: str) -> None:
    target = os.path.join(new_root, "dev", name)
    open(target, "ab").close()
    sc.mount(f"/dev/{name}", target, None, sc.MS_BIND)
    keep = sc.statvfs_mount_flags(f"/dev/{name}") & ~sc.MS_NODEV
    sc.mount(None, target, None, sc.MS_REMOUNT | sc.MS_BIND | sc.MS_NOSUID | keep)


def enter(
    scratch_dir: str, package_dir: str, *, in_user_namespace: bool, hidden: Sequence[str] = ()
) -> list[str]:
    """Move this process into a new mount namespace whose root is the view.

    Args:
        scratch_dir: An existing, empty host directory to build the view on.
        package_dir: The server's package directory (hidden).
        hidden: More host directories kernels must not read (the task cache,
            the server's state); covered where an exposed directory holds them.
        in_user_namespace: The process is root only inside a user namespace;
            then devices cannot be bind-mounted with ``nodev`` cleared and
            ``/dev`` is a read-only bind of the host's.

    Returns:
        The host paths that were exposed.

    Raises:
        OSError: A namespace or mount operation was refused.
    """
    sc.unshare(sc.CLONE_NEWNS)
    sc.mount(None, "/", None, sc.MS_REC | sc.MS_PRIVATE)
    new_root = os.path.realpath(scratch_dir)
    sc.mount("tmpfs", new_root, "tmpfs", sc.MS_NOSUID | sc.MS_NODEV, "mode=0755,size=16m")
    paths = exposed_paths(package_dir)
    for path in paths:
        target = new_root + path
        if os.path.islink(path):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.symlink(os.readlink(path), target)
        else:
            _bind_readonly(path, target, recursive=True)
    for path in covered_paths([package_dir, *hidden], paths):
        _cover(new_root + path)
    _bind_readonly("/sys", new_root + "/sys", recursive=True)
    _hide_cgroup_tree(new_root)
    os.makedirs(new_root + "/proc")
    sc.mount("/proc", new_root + "/proc", None, sc.MS_BIND | sc.MS_REC)
    os.makedirs(new_root + "/dev")
    if in_user_namespace:
        _bind_readonly("/dev", new_root + "/dev", recursive=True)
    else:
        sc.mount(
            "tmpfs", new_root + "/dev", "tmpfs", sc.MS_NOSUID | sc.MS_NOEXEC, "mode=0755,size=64k"
        )
        for name in _DEVICES:
            _bind_device(name, new_root)
        os.symlink("/proc/self/fd", new_root + "/dev/fd")
        for number, name in enumerate(("stdin", "stdout", "stderr")):
            os.symlink(f"/proc/self/fd/{number}", f"{new_root}/dev/{name}")
        os.makedirs(new_root + "/dev/shm")
    for name, mode in (("tmp", "1777"), (SLOTS_DIR.strip("/"), "0711")):
        os.makedirs(f"{new_root}/{name}")
        sc.mount(
            "tmpfs",
            f"{new_root}/{name}",
            "tmpfs",
            sc.MS_NOSUID | sc.MS_NODEV,
            f"mode={mode},size=1m",
        )
    sc.mount(None, new_root + SLOTS_DIR, None, sc.MS_SHARED)
    os.makedirs(new_root + "/.old")
    sc.pivot_root(new_root, new_root + "/.old")
    os.chdir("/")
    sc.umount("/.old", sc.MNT_DETACH)
    os.rmdir("/.old")
    sc.mount(None, "/", None, sc.MS_REMOUNT | sc.MS_RDONLY | sc.MS_NOSUID | sc.MS_NODEV)
    return paths
