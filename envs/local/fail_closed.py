"""The fail-closed rule of the local sandbox, written once.

Every protection and limit the server claims for its episodes is either verified
at start-up by trying it, or the server refuses to start with one line that names
what is missing and the setting that would change it. Concretely:

* **Isolation.** ``auto`` serves the strongest mode whose probe (``probe``: the
  zygote's and kernel's own confinement code, run in a throwaway process) works;
  it never falls through to ``none``. When no mode works, start-up is refused
  (``no_isolation``).
* **``none``** is served only when asked for by name, only on a loopback address,
  with sandbox-environment builds off, and with a banner (``check_unconfined``,
  ``BANNER``); ``/sandbox`` and ``/health`` then say ``unconfined``.
* **What the probe's kernel saw.** Each protection the mode claims that a kernel
  can observe of itself (its uid, seccomp, ``no_new_privs``, its own namespaces,
  its rlimits) must match what the probe's confined kernel reported
  (``check_facts``); a mismatch refuses.
* **Per-episode limits.** Memory and pids per episode need cgroups, which the
  backend verifies by creating one and writing its limits (``cgroups``). Where
  they cannot be had, start-up is refused unless the operator accepts per-process
  limits (``RLIMIT_AS``, and ``RLIMIT_NPROC`` per slot uid where slots have their
  own uids) with ``ANALYST_ENV_PER_PROCESS_LIMITS=1`` (``--per-process-limits``);
  the report then says so (``check_limits``).

A refusal is a ``Refusal`` (a ``ValueError``, so existing callers that turn a bad
setting into a start-up error keep working); ``analyst-env serve`` prints its
``line`` and exits 2.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from typing import Any

PREFIX = "analyst-env: refusing to start: "
LOOPBACK_NAMES = frozenset({"localhost", "ip6-localhost"})
BANNER = (
    "analyst-env: WARNING: isolation none: episodes run UNCONFINED as the server's user; "
    "a cell can read the token and every gold answer and kill the server. "
    "Loopback only, builds off; never publish this."
)
ACCEPT_PER_PROCESS = "ANALYST_ENV_PER_PROCESS_LIMITS=1 (--per-process-limits)"


PER_PROCESS_ENV = "ANALYST_ENV_PER_PROCESS_LIMITS"
_TRUE = frozenset({"1", "true", "yes", "on"})


def per_process_accepted(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the operator accepts per-process limits (``ANALYST_ENV_PER_PROCESS_LIMITS``).

    Read from the environment so that every backend of the server's process tree (its
    workers, a build's import check) follows the one choice ``serve`` was started with.
    """
    source = os.environ if environ is None else environ
    return source.get(PER_PROCESS_ENV, "").strip().lower() in _TRUE


class Refusal(ValueError):
    """The server must not start: a claimed protection could not be verified here.

    ``line`` is the one line ``serve`` prints (``analyst-env: refusing to start: ...``).
    """

    def __init__(self, reason: str) -> None:
        self.line = PREFIX + _one_line(reason)
        super().__init__(self.line)


def _one_line(text: str, limit: int = 2000) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _short(reason: str) -> str:
    return _one_line(reason, 240)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (127.0.0.0/8, ``::1``, ``localhost``)."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def no_isolation(tried: Mapping[str, str]) -> Refusal:
    """The refusal of ``auto`` when every real mode failed its probe (``tried``: mode -> why)."""
    why = "; ".join(f"{mode}: {_short(reason)}" for mode, reason in tried.items())
    return Refusal(
        f"no sandbox isolation works on this host ({why}); set ANALYST_ENV_ISOLATION=none "
        "(--isolation none) to serve unconfined on loopback only"
    )


def check_unconfined(host: str, builds_enabled: bool) -> None:
    """``none`` was asked for by name: allowed on a loopback address with builds off only.

    Raises:
        Refusal: The server would listen beyond loopback, or builds are on.
    """
    if not is_loopback(host):
        raise Refusal(
            f"isolation none runs episodes unconfined and is served on loopback only, not on "
            f"{host!r}; use --host 127.0.0.1, or a real isolation (ANALYST_ENV_ISOLATION=auto)"
        )
    if builds_enabled:
        raise Refusal(
            "isolation none cannot run sandbox-environment builds (their import check would run "
            "unconfined); drop --allow-builds (ANALYST_ENV_ALLOW_BUILDS), or use a real isolation "
            "(ANALYST_ENV_ISOLATION=auto)"
        )


def check_facts(mode: str, claims: Mapping[str, Any], facts: Mapping[str, Any]) -> None:
    """Each claim a kernel can observe of itself must match what the probe's kernel saw.

    Args:
        mode: The isolation mode served.
        claims: ``isolation.protections(mode)``.
        facts: ``probe``'s facts (empty for ``none``, which claims nothing to check).

    Raises:
        Refusal: A claimed protection was not in force in the probe's kernel.
    """
    if not facts:
        return
    missing = []
    for name in ("seccomp", "no_new_privs"):
        if claims.get(name) and not facts.get(name):
            missing.append(name)
    for ns in ("net", "pid", "mnt"):
        claimed = claims.get(f"{'mount' if ns == 'mnt' else ns}_namespace")
        if claimed and facts.get(f"{ns}_namespace") == facts.get(f"server_{ns}_namespace"):
            missing.append(f"{ns} namespace")
    if claims.get("per_slot_uid") and facts.get("uid") == facts.get("server_uid"):
        missing.append("per-slot uid")
    if claims.get("cgroup_tree_hidden") and facts.get("cgroup_entries_visible") not in (None, 0):
        missing.append("a hidden /sys/fs/cgroup")
    if "AS" in str(claims.get("rlimits", "")) and facts.get("rlimit_as", -1) == -1:
        missing.append("RLIMIT_AS")
    if "NPROC" in str(claims.get("rlimits", "")) and facts.get("rlimit_nproc", -1) == -1:
        missing.append("RLIMIT_NPROC")
    if missing:
        raise Refusal(
            f"isolation {mode}: the probe's kernel ran without {', '.join(missing)}, which this "
            "mode claims; choose another mode with ANALYST_ENV_ISOLATION (--isolation)"
        )


def check_limits(
    mode: str,
    cgroup_failure: str | None,
    has_cgroups: bool,
    slot_uids: bool,
    accept_per_process: bool,
) -> str:
    """Memory and pids per episode need verified cgroups, or the operator's consent to less.

    Args:
        mode: The isolation mode served.
        cgroup_failure: Why the backend's cgroups could not be set up (``None``: they were,
            or were not tried).
        has_cgroups: Whether verified cgroup limits apply to every episode.
        slot_uids: Whether each slot has its own uid (then ``RLIMIT_NPROC`` counts per episode).
        accept_per_process: ``ANALYST_ENV_PER_PROCESS_LIMITS``: the operator accepts
            per-process limits where cgroups cannot be had.

    Returns:
        How the limits are enforced, for the report (``per episode (cgroups)`` or
        ``per process (...)``).

    Raises:
        Refusal: Per-episode limits cannot be enforced here and were not waived.
    """
    if has_cgroups and cgroup_failure is None:
        return "per episode (cgroups)"
    if mode == "none" or accept_per_process:
        return "per process (RLIMIT_AS" + (", RLIMIT_NPROC per slot uid)" if slot_uids else ")")
    why = cgroup_failure or f"isolation {mode} has no per-episode cgroups"
    raise Refusal(
        f"memory and pids limits per episode cannot be enforced here ({_short(why)}); run as "
        "root with writable cgroups, or set " + ACCEPT_PER_PROCESS + " to accept per-process "
        "limits"
    )
