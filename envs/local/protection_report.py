"""What ``LocalSandboxBackend.protections()`` reports: the protections episodes really get.

The isolation mode's own protections (``isolation.protections``), what the host's
cgroups add or could not give, how an episode is killed, and what a kernel
confined this way saw of itself when the mode was tried. ``/sandbox`` serves it,
``/health`` summarises it and ``analyst-env serve`` prints it at start, so an
operator reads there whether this host runs episodes degraded.
"""

from __future__ import annotations

from typing import Any

from analyst_env.envs.local.cgroups import CgroupManager
from analyst_env.envs.local.isolation import Mode, protections
from analyst_env.envs.local.uid_ranges import UidRange


def degradation(cgroups: CgroupManager | None) -> str:
    """What a slot-uid mode normally gives but this host could not (empty when nothing is
    missing)."""
    if cgroups is not None and cgroups.failure:
        return (
            f"{cgroups.failure}: memory is limited per process (RLIMIT_AS) and the pids "
            "limit per uid (RLIMIT_NPROC), not per episode"
        )
    return ""


def protection_report(
    mode: Mode,
    isolation_report: dict[str, Any],
    cgroups: CgroupManager | None,
    uid_range: UidRange | None,
    standbys: str,
) -> dict[str, bool | str]:
    """The backend's ``protections()``; ``standbys`` is the pool size as shown (``4`` or
    ``4-256``)."""
    info = protections(mode)
    if cgroups is not None:
        info.update(cgroups.describe())
        info["kill"] = "cgroup.kill" if cgroups.can_kill() else "per-uid scan"
    else:
        info.update(cgroup_memory=False, cgroup_pids=False, cgroup_cpu=False, cgroup_kill=False)
        info["kill"] = "process-tree scan"
    if not info["cgroup_memory"]:
        info["memory_limit"] = "per process (RLIMIT_AS)"
    info["degraded"] = degradation(cgroups)
    info["stronger_modes_unavailable"] = "; ".join(
        f"{m}: {why}" for m, why in isolation_report["tried"].items()
    )
    facts = isolation_report["facts"]
    if facts:  # what a kernel confined this way saw of itself when the mode was tried
        info["verified"] = ", ".join(
            [f"uid {facts['uid']}"]
            + [name for name in ("seccomp", "no_new_privs") if facts.get(name)]
        )
    info["standbys"] = standbys
    if uid_range is not None:
        info["uid_range"] = f"{uid_range.base}-{uid_range.base + uid_range.size - 1}"
    return info
