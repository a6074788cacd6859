"""Try an isolation mode for real before serving with it: ``isolation=auto`` takes the strongest
that works.

Reading sysctls says what a kernel allows in general, not what this process
may do here: a container's seccomp profile refuses ``unshare``, a missing
``CAP_NET_ADMIN`` refuses bringing up loopback, a read-only ``/proc`` refuses
the PID namespace's own ``/proc``. So each mode is tried the way a zygote and
its kernel use it, with the same code (``isolation.enter_zygote``,
``enter_pid_namespace``, ``make_slot``, ``confine_child``), in a throwaway
process: ``python -m analyst_env.envs.local.probe --mode M --host-root DIR``.
It prints one JSON line, ``{"ok": true, "facts": {...}}`` with what the
confined child observed of itself (uid, seccomp, no_new_privs, namespaces,
rlimits, how much of ``/sys/fs/cgroup`` it can list) beside the server's own
uid and namespaces (``server_*``), or ``{"ok": false, "error": "..."}``;
``try_mode`` runs it and caches the answer per process (a host does not change
its mind between two backends). ``fail_closed.check_facts`` holds the mode's
claims against these facts before anything is served.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import traceback
from typing import Any

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_PROBE_UID = 65534  # nobody: the probe's kernel switches to it where slots get their own uids
_cache: dict[tuple[str, int], dict] = {}


def _own_identity(prefix: str = "") -> dict[str, Any]:
    """This process's uid and namespaces (``prefix`` names the server's, read before confining)."""
    facts: dict[str, Any] = {f"{prefix}uid": os.getuid()}
    for ns in ("net", "pid", "mnt"):
        try:
            facts[f"{prefix}{ns}_namespace"] = os.readlink(f"/proc/self/ns/{ns}")
        except OSError:
            facts[f"{prefix}{ns}_namespace"] = None
    return facts


def _cgroup_entries() -> int | None:
    """How many entries the kernel sees under ``/sys/fs/cgroup`` (None: not readable)."""
    try:
        return len(os.listdir("/sys/fs/cgroup"))
    except OSError:
        return None


def _facts(server: dict[str, Any]) -> dict:
    """What a confined kernel can see of its own confinement, beside the server's identity."""
    status = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            status[key] = value.strip()
    facts: dict[str, Any] = {
        **server,
        **_own_identity(),
        "seccomp": status.get("Seccomp") == "2",
        "no_new_privs": status.get("NoNewPrivs") == "1",
        "rlimit_as": resource.getrlimit(resource.RLIMIT_AS)[0],
        "rlimit_nproc": resource.getrlimit(resource.RLIMIT_NPROC)[0],
        "cgroup_entries_visible": _cgroup_entries(),
    }
    return facts


def _run(mode: str, host_root: str) -> dict:
    from analyst_env.envs.kernel import procctl
    from analyst_env.envs.local import isolation, seccomp, slot_dirs

    server = _own_identity("server_")
    hidden = [_PACKAGE_DIR]
    exposed: list[str] = []
    if mode != "none":
        scratch = os.path.join(host_root, "view")
        if mode in isolation.NAMESPACE_MODES:
            os.makedirs(scratch, exist_ok=True)
        exposed = isolation.enter_zygote(mode, scratch, _PACKAGE_DIR, hidden)  # type: ignore[arg-type]
        if mode in isolation.NAMESPACE_MODES:
            isolation.enter_pid_namespace(os.open(os.devnull, os.O_RDONLY))
    uid = _PROBE_UID if isolation.uses_slot_uids(mode) else None
    slot = slot_dirs.make_slot(mode, host_root, "probe", uid, 16)  # type: ignore[arg-type]
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            program = seccomp.build_filter() if seccomp.supported() else None
            isolation.confine_child(mode, slot, uid, isolation.Sizing(), program, exposed)  # type: ignore[arg-type]
            os.write(write_end, json.dumps({"ok": True, "facts": _facts(server)}).encode())
            os._exit(0)
        except BaseException as exc:
            os.write(
                write_end,
                json.dumps({"ok": False, "error": f"kernel: {type(exc).__name__}: {exc}"}).encode(),
            )
            os._exit(1)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as f:
        reply = f.read()
    os.waitpid(pid, 0)
    slot_dirs.remove_slot(mode, host_root, "probe")  # type: ignore[arg-type]
    procctl.set_dumpable(True)
    return json.loads(reply or b'{"ok": false, "error": "the kernel exited without a word"}')


def main() -> None:
    """Entry point: probe one mode, print the JSON verdict."""
    # The first paragraph of the docstring, on one line.
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--mode", required=True)
    parser.add_argument("--host-root", required=True)
    args = parser.parse_args()
    try:
        verdict = _run(args.mode, args.host_root)
    except BaseException as exc:
        verdict = {
            "ok": False,
            "error": f"zygote: {type(exc).__name__}: {exc}",
            "trace": traceback.format_exc()[-2000:],
        }
    print(json.dumps(verdict), flush=True)


INHERITED_ENV = "ANALYST_ENV_PROBE_VERDICTS"
"""Where ``serve``'s supervisor hands its verdicts to its workers (``export_verdicts``)."""


def export_verdicts() -> None:
    """Put this process's verdicts in its environment, for the workers it starts.

    A supervisor of ``serve --workers N`` checks the fail-closed rule once before
    starting them; its workers, the same binary on the same host as the same user, take
    its verdicts instead of probing again (about a second of CPU each). A verdict can
    only name a mode to try: the zygote and every kernel still confine themselves and
    fail rather than run unconfined.
    """
    os.environ[INHERITED_ENV] = json.dumps(
        [[mode, euid, verdict] for (mode, euid), verdict in _cache.items()]
    )


def _inherit() -> None:
    try:
        entries = json.loads(os.environ.pop(INHERITED_ENV, "[]"))
        for mode, euid, verdict in entries:
            if euid == os.geteuid() and isinstance(verdict, dict):
                _cache.setdefault((str(mode), euid), verdict)
    except (ValueError, TypeError):
        pass


def try_mode(mode: str, timeout_s: float = 60.0) -> dict:
    """Probe ``mode`` in a throwaway process: ``{"ok": bool, "facts" | "error"}`` (cached per
    process, or inherited from the supervisor that started this worker)."""
    if INHERITED_ENV in os.environ:
        _inherit()
    key = (mode, os.geteuid())
    if key not in _cache:
        root = tempfile.mkdtemp(prefix="analyst-env-probe-")
        try:
            done = subprocess.run(
                [
                    sys.executable,
                    "-P",
                    "-m",
                    "analyst_env.envs.local.probe",
                    "--mode",
                    mode,
                    "--host-root",
                    root,
                ],
                capture_output=True,
                text=True,
                timeout=timeout_s,
                cwd="/",
            )
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            verdict = (
                json.loads(lines[-1])
                if lines
                else {"ok": False, "error": (done.stderr or "no output")[-500:]}
            )
        except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
            verdict = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        finally:
            shutil.rmtree(root, ignore_errors=True)
        _cache[key] = verdict
    return _cache[key]


if __name__ == "__main__":
    main()
