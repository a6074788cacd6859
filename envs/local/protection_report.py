"""What ``LocalSandboxBackend.protections()`` reports: the protections episodes really get.

The isolation mode's own protections (``isolation.protections``), what the host's
cgroups add or could not give, how an episode is killed, and what a kernel
confined this way saw of itself when the mode was tried. ``/sandbox`` serves it,
``/health`` summarises it and ``analyst-env serve`` prints it at start, so an
operator reads there whether this host runs episodes degraded. Only verified
claims get this far: the backend refuses to start otherwise (``fail_closed``).
"""

from __future__ import annotations

from typing import Any, Literal

from analyst_env.envs.capabilities import BackendCapabilities
from analyst_env.envs.local.cgroups import CgroupManager
from analyst_env.envs.local.fail_closed import BANNER
from analyst_env.envs.local.isolation import NAMESPACE_MODES, Mode, protections
from analyst_env.envs.local.uid_ranges import UidRange


def declared_capabilities(mode: Mode, cgroups: CgroupManager | None) -> BackendCapabilities:
    """The backend's ``capabilities``: what its sandboxes can do in ``mode`` on this host.

    Its own network namespace (loopback only) in ``full`` and ``userns``; ``landlock``
    denies TCP; ``none`` leaves the host's network. Limits are per episode where the
    episode has cgroups of its own.
    """
    network: Literal["none", "loopback", "host"] = "host"
    if mode in NAMESPACE_MODES:
        network = "loopback"
    elif mode == "landlock":
        network = "none"
    return BackendCapabilities(
        per_sandbox_limits=cgroups is not None and not cgroups.failure,
        network=network,
        warm_pool=True,
        verify_commands=True,
    )


def degradation(cgroups: CgroupManager | None) -> str:
    """What a slot-uid mode normally gives but this host could not (empty when nothing is
    missing)."""
    if cgroups is not None and cgroups.failure:
        return (
            f"{cgroups.failure}: memory is limited per process (RLIMIT_AS) and the pids "
            "limit per uid (RLIMIT_NPROC), not per episode"
        )
    return ""


def verified(facts: dict[str, Any], cgroups: CgroupManager | None, rlimits: str = "") -> str:
    """What start-up saw in force: the probe's confined kernel, and cgroup limits written
    (``rlimits``: the mode's claimed ones, e.g. ``AS,FSIZE,NOFILE,CPU,NPROC``)."""
    seen: list[str] = []
    if facts:  # what a kernel confined this way saw of itself when the mode was tried
        seen.append(f"uid {facts['uid']}")
        seen += [name for name in ("seccomp", "no_new_privs") if facts.get(name)]
        for ns in ("net", "pid", "mnt"):
            if facts.get(f"{ns}_namespace") not in (None, facts.get(f"server_{ns}_namespace")):
                seen.append(f"own {ns} namespace")
        claimed = rlimits.split(",")
        for name in ("AS", "NPROC"):
            if name in claimed and facts.get(f"rlimit_{name.lower()}", -1) != -1:
                seen.append(f"RLIMIT_{name}")
        if facts.get("cgroup_entries_visible") in (None, 0):
            seen.append("no host cgroup tree")
    if cgroups is not None and cgroups.limits_everything():
        seen.append("cgroup limits written")
    return ", ".join(seen) if seen else "nothing (unconfined)"


def protection_report(
    mode: Mode,
    isolation_report: dict[str, Any],
    cgroups: CgroupManager | None,
    uid_range: UidRange | None,
    standbys: str,
    limits: str = "",
) -> dict[str, bool | str]:
    """The backend's ``protections()``; ``standbys`` is the pool size as shown (``4`` or
    ``4-256``), ``limits`` how memory, CPU and pids are enforced (``fail_closed.check_limits``).

    Every entry is what start-up verified (the probe's kernel, the cgroups written),
    never only what was requested: a claim that could not be verified stopped the
    server (``fail_closed``), and ``none``, which claims nothing, says ``unconfined``.
    """
    info = protections(mode)
    info["unconfined"] = mode == "none"
    if mode == "none":
        info["warning"] = BANNER
    if limits:
        info["limits"] = limits
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
    info["verified"] = verified(facts, cgroups, str(info["rlimits"]))
    info["standbys"] = standbys
    if uid_range is not None:
        info["uid_range"] = f"{uid_range.base}-{uid_range.base + uid_range.size - 1}"
    return info
