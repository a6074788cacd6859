"""Per-episode cgroups: memory, pids and CPU limits, and a kill that reaches every process.

Hosts differ: a pure cgroup v2 tree has the controllers in the unified
hierarchy; a hybrid host (like this project's VMs) has them in v1 hierarchies
and a unified (v2) tree without controllers, whose ``cgroup.kill`` still works.
``CgroupManager`` detects at start, per controller, where it lives (v2 if the
unified tree offers it, else v1), and whether a v2 tree exists for the kill.

Each slot uid gets one cgroup in every hierarchy used, created on first use
under the server's own cgroup (so outer limits still apply) and reused by the
slot's later episodes. A process is moved in by writing its pid to
``cgroup.procs`` of each (about 12 ms on v1, an RCU sync, which is why it runs
in the background refill, never on a request). Ending an episode writes ``1``
to ``cgroup.kill``: every process in it dies in one step, including ones that
``setsid``/double-forked away from the kernel. Without a v2 tree the caller
falls back to killing by uid.

Needs write access to the cgroup trees (root, or a delegated subtree); without
it ``available()`` is false and nothing is limited here.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import time

log = logging.getLogger(__name__)
_CONTROLLERS = ("memory", "pids", "cpu")
_CPU_PERIOD_US = 100_000
_VERIFY_UID = -1  # the throwaway cgroup ``verify`` writes limits to (``u-1``)


def _mounts() -> tuple[str | None, dict[str, str]]:
    """The v2 mount point and ``{controller: v1 mount point}`` from mountinfo."""
    v2: str | None = None
    v1: dict[str, str] = {}
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fstype, _, options = right.split()[:3]
            mount_point = left.split()[4]
            if fstype == "cgroup2" and v2 is None:
                v2 = mount_point
            elif fstype == "cgroup":
                for option in options.split(","):
                    if option in _CONTROLLERS:
                        v1.setdefault(option, mount_point)
    return v2, v1


def _own_paths() -> dict[str, str]:
    """This process's cgroup path per v1 controller, and ``""`` for v2."""
    paths: dict[str, str] = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                paths[controller] = path
    return paths


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


_OWNER = re.compile(r"^analyst-env-(\d+)-")


def sweep_stale(parent: str) -> list[str]:
    """Remove the cgroups that servers which are no longer running left under ``parent``.

    A server killed without closing its backend (SIGKILL, a crash) leaves its
    ``analyst-env-<pid>-...`` directories behind, with any process still in them.
    Each one whose server pid is gone is emptied (``cgroup.kill`` where the tree
    has it, else SIGKILL to every listed pid) and removed.

    Returns:
        The directories removed.
    """
    removed: list[str] = []
    try:
        entries = os.listdir(parent)
    except OSError:
        return removed
    for entry in entries:
        match = _OWNER.match(entry)
        if match is None or _alive(int(match.group(1))):
            continue
        top = os.path.join(parent, entry)
        try:
            slots = [
                os.path.join(top, d) for d in os.listdir(top) if os.path.isdir(os.path.join(top, d))
            ]
        except FileNotFoundError:
            continue  # another server starting at the same time swept it first
        except OSError as exc:
            log.warning("could not list stale cgroup %s: %s", top, exc)
            continue
        for path in [*slots, top]:
            _empty(path)
            try:
                os.rmdir(path)
            except FileNotFoundError:
                pass  # removed by a concurrent sweep
            except OSError as exc:
                log.warning("could not remove stale cgroup %s: %s", path, exc)
                break
        else:
            removed.append(top)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _empty(path: str, timeout_s: float = 2.0) -> None:
    kill = os.path.join(path, "cgroup.kill")
    procs = os.path.join(path, "cgroup.procs")
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with open(procs) as f:
                pids = [int(p) for p in f.read().split()]
        except OSError:
            return
        if not pids or time.monotonic() > deadline:
            return
        if os.path.exists(kill):
            try:
                _write(kill, "1")
            except OSError:
                pass
        else:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        time.sleep(0.01)


class CgroupManager:
    """Creates, fills, kills and removes the per-slot cgroups of one backend.

    Args:
        name: This backend's directory name in each hierarchy (unique per server).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.controllers: dict[str, str] = {}  # controller -> "v1" | "v2"
        self._bases: dict[str, str] = {}  # controller or "kill" -> base dir
        self._made: dict[int, list[str]] = {}
        self.failure: str | None = None  # why cgroups could not be set up, if they could not
        try:
            self._detect()
        except OSError as exc:
            self.failure = f"cgroups unavailable: {exc}"
            log.info("%s", self.failure)
            self.controllers.clear()
            self._bases.clear()
        if os.geteuid() == 0 and self.failure is None and "memory" not in self.controllers:
            self.failure = "no writable cgroup memory controller"

    def _detect(self) -> None:
        if os.geteuid() != 0:
            return  # a delegated subtree is not searched for; report unavailable
        v2_mount, v1_mounts = _mounts()
        own = _own_paths()
        v2_base = None
        if v2_mount is not None:
            v2_base = os.path.join(v2_mount + own.get("", "/"), self.name)
            sweep_stale(os.path.dirname(v2_base))
            os.makedirs(v2_base, exist_ok=True)
            with open(os.path.join(os.path.dirname(v2_base), "cgroup.controllers")) as f:
                offered = f.read().split()
            wanted = [c for c in _CONTROLLERS if c in offered]
            if wanted:
                try:
                    _write(
                        os.path.join(v2_base, "cgroup.subtree_control"),
                        " ".join("+" + c for c in wanted),
                    )
                    for controller in wanted:
                        self.controllers[controller] = "v2"
                        self._bases[controller] = v2_base
                except OSError as exc:
                    log.warning("cannot enable v2 controllers %s: %s", wanted, exc)
            if os.path.exists(os.path.join(v2_base, "cgroup.kill")):
                self._bases["kill"] = v2_base
        for controller in _CONTROLLERS:
            if controller in self.controllers or controller not in v1_mounts:
                continue
            base = os.path.join(v1_mounts[controller] + own.get(controller, "/"), self.name)
            sweep_stale(os.path.dirname(base))
            os.makedirs(base, exist_ok=True)
            self.controllers[controller] = "v1"
            self._bases[controller] = base

    def verify(self, memory_mb: int, cpus: float, pids: int) -> None:
        """Try the limits for real: make a throwaway slot cgroup, write them, remove it.

        Finding a controller mounted says nothing about whether this process may
        write its files (a container's read-only cgroupfs, a tree owned by another
        user); a refusal here sets ``failure`` and leaves nothing to limit with.
        """
        if self.failure is not None or not self._bases:
            return
        try:
            self.prepare(_VERIFY_UID, memory_mb, cpus, pids)
        except OSError as exc:
            self.failure = f"cgroup limits cannot be written: {exc}"
            log.info("%s", self.failure)
        finally:
            for path in self._made.pop(_VERIFY_UID, None) or self._dirs(_VERIFY_UID):
                try:
                    os.rmdir(path)
                except OSError:
                    pass
        if self.failure is not None:
            self.controllers.clear()
            self._bases.clear()

    def limits_everything(self) -> bool:
        """Whether every episode's memory, pids and CPU are limited by a verified cgroup."""
        return self.failure is None and set(_CONTROLLERS) <= set(self.controllers)

    def available(self) -> bool:
        """Whether any limit or the kill can be applied."""
        return bool(self._bases)

    def can_kill(self) -> bool:
        """Whether ``kill`` reaches the whole tree (v2 ``cgroup.kill``)."""
        return "kill" in self._bases

    def describe(self) -> dict[str, bool | str]:
        """Which protections this manager provides, for ``protections()``."""
        out: dict[str, bool | str] = {
            f"cgroup_{c}": self.controllers.get(c, False) for c in _CONTROLLERS
        }
        out["cgroup_kill"] = self.can_kill()
        return out

    def _dirs(self, uid: int) -> list[str]:
        return sorted({os.path.join(base, f"u{uid}") for base in self._bases.values()})

    def prepare(self, uid: int, memory_mb: int, cpus: float, pids: int) -> None:
        """Create (once) the slot's cgroups and set its limits."""
        if uid in self._made:
            return
        dirs = self._dirs(uid)
        for path in dirs:
            os.makedirs(path, exist_ok=True)
        memory = memory_mb * 1024 * 1024
        quota = max(1000, int(cpus * _CPU_PERIOD_US))
        for controller, version in self.controllers.items():
            path = os.path.join(self._bases[controller], f"u{uid}")
            if controller == "memory":
                if version == "v2":
                    _write(f"{path}/memory.max", str(memory))
                    if os.path.exists(f"{path}/memory.swap.max"):
                        _write(f"{path}/memory.swap.max", "0")
                else:
                    _write(f"{path}/memory.limit_in_bytes", str(memory))
                    if os.path.exists(f"{path}/memory.memsw.limit_in_bytes"):
                        _write(f"{path}/memory.memsw.limit_in_bytes", str(memory))
            elif controller == "pids":
                _write(f"{path}/pids.max", str(pids))
            elif controller == "cpu":
                if version == "v2":
                    _write(f"{path}/cpu.max", f"{quota} {_CPU_PERIOD_US}")
                else:
                    _write(f"{path}/cpu.cfs_period_us", str(_CPU_PERIOD_US))
                    _write(f"{path}/cpu.cfs_quota_us", str(quota))
        self._made[uid] = dirs

    def add(self, uid: int, pid: int) -> None:
        """Move ``pid`` into the slot's cgroups (after ``prepare``)."""
        for path in self._made[uid]:
            _write(f"{path}/cgroup.procs", str(pid))

    def pids(self, uid: int) -> set[int]:
        """The processes currently in the slot's cgroups."""
        found: set[int] = set()
        for path in self._made.get(uid, ()):
            try:
                with open(f"{path}/cgroup.procs") as f:
                    found.update(int(line) for line in f if line.strip())
            except OSError:
                pass
        return found

    def freeze(self, uid: int) -> bool:
        """Stop every process in the slot where it stands (v2 ``cgroup.freeze``); True if done.

        A frozen process runs nothing and can still be killed: ``kill`` ends it later.
        Killing right away costs the CPU of each process's exit at once (unmapping the
        zygote's ~120 MB it shares, ~4-8 ms an episode here), in the middle of whatever
        made the kill (a burst of resets ending the previous batch's episodes).
        """
        if uid not in self._made or not self.can_kill():
            return False
        try:
            _write(os.path.join(self._bases["kill"], f"u{uid}", "cgroup.freeze"), "1")
        except OSError as exc:
            log.warning("cgroup.freeze failed for slot u%d: %s", uid, exc)
            return False
        return True

    def signal_kill(self, uid: int) -> None:
        """Kill every process in the slot (v2 ``cgroup.kill``), frozen ones included; no wait."""
        if uid not in self._made or not self.can_kill():
            return
        slot = os.path.join(self._bases["kill"], f"u{uid}")
        try:
            _write(os.path.join(slot, "cgroup.kill"), "1")
        except OSError as exc:
            log.warning("cgroup.kill failed for slot u%d: %s", uid, exc)
        try:
            _write(os.path.join(slot, "cgroup.freeze"), "0")  # thawed, the killed can exit
        except OSError:
            pass

    def kill(self, uid: int, timeout_s: float = 5.0) -> bool:
        """Kill every process in the slot (v2 ``cgroup.kill``) and wait until it is empty.

        Returns:
            True if the slot is empty afterwards.
        """
        if uid not in self._made:
            return True
        self.signal_kill(uid)
        deadline = time.monotonic() + timeout_s
        while self.pids(uid):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.002)
        return True

    def close(self) -> None:
        """Remove every cgroup this manager made, killing what is still inside."""
        for dirs in self._made.values():
            for path in dirs:
                _empty(path)
                try:
                    os.rmdir(path)
                except OSError as exc:
                    log.warning("could not remove cgroup %s: %s", path, exc)
        self._made.clear()
        for base in set(self._bases.values()):
            try:
                os.rmdir(base)
            except OSError:
                pass
