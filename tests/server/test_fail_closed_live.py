"""Live: ``analyst-env serve`` fails closed (envs/local/fail_closed.py).

Real ``serve`` processes. The first tests recreate the issue's host for real: a
process without capabilities, under a seccomp filter that denies ``unshare`` and
``setns`` (Docker's default profile) and answers the Landlock syscalls with
``ENOSYS`` (an older kernel, or Docker before it knew them). No isolation works
there: ``auto`` must not fall through to ``none`` but refuse to start, with one
line on stderr and exit status 2, as one process and as a supervisor of workers.
Then ``none``, asked for by name: refused beyond loopback and with builds on;
on loopback it serves, says ``unconfined`` at ``/sandbox`` and ``/health``, prints
its banner and refuses builds.
"""

from __future__ import annotations

import errno
import os
import platform
import struct
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from server.serve_process import ServeProcess

from analyst_env.server.local_server import free_port

pytestmark = pytest.mark.live

_LANDLOCK_SYSCALLS = (444, 445, 446)  # create_ruleset, add_rule, restrict_self: every arch
_BPF_LD_W_ABS, _BPF_JEQ_K, _BPF_RET_K = 0x20, 0x15, 0x06
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000


def landlock_enosys_filter() -> bytes:
    """A seccomp program answering the three Landlock syscalls with ENOSYS, allowing the rest."""
    n = len(_LANDLOCK_SYSCALLS)
    program = [(_BPF_LD_W_ABS, 0, 0, 0)]
    program += [(_BPF_JEQ_K, n - i, 0, nr) for i, nr in enumerate(_LANDLOCK_SYSCALLS)]
    program += [(_BPF_RET_K, 0, 0, _RET_ALLOW), (_BPF_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS)]
    return b"".join(struct.pack("=HBBI", code, jt, jf, k) for code, jt, jf, k in program)


# Runs ``argv[1:]`` with no capabilities, no namespaces and no Landlock (filters survive exec).
NO_ISOLATION_HOST = """
import os, sys
from analyst_env.envs.local import seccomp
from analyst_env.envs.local.confine_steps import drop_capabilities
seccomp.set_no_new_privs()
seccomp.install(seccomp.build_filter())  # like Docker's default profile: no unshare, setns
seccomp.install(bytes.fromhex(os.environ.pop("LANDLOCK_ENOSYS")))
drop_capabilities()
os.execv(sys.argv[1], sys.argv[1:])
"""


def analyst_env() -> str:
    return str(Path(sys.executable).with_name("analyst-env"))


def serve(
    tmp_path: Path, *args: str, wrapper: bool = False, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``analyst-env serve ARGS`` to its end (a refusal ends it at once)."""
    (tmp_path / "scratch").mkdir(exist_ok=True)
    env = {
        **os.environ,
        "TMPDIR": str(tmp_path / "scratch"),
        "ANALYST_ENV_STATE_DIR": str(tmp_path / "state"),
        "LANDLOCK_ENOSYS": landlock_enosys_filter().hex(),
        **(extra_env or {}),
    }
    env.pop("ANALYST_ENV_ISOLATION", None)
    env.pop("ANALYST_ENV_PER_PROCESS_LIMITS", None)
    command = [analyst_env(), "serve", "--port", str(free_port()), "--dataset", "starter", *args]
    if wrapper:
        command = [sys.executable, "-P", "-c", NO_ISOLATION_HOST, *command]
    return subprocess.run(
        command, env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=300
    )


def one_refusal(done: subprocess.CompletedProcess) -> str:
    """The single line a refusal prints; the process ended with status 2 and no traceback."""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert lines[0].startswith("analyst-env: refusing to start: "), lines[0]
    return lines[0]


needs_filter = pytest.mark.skipif(
    platform.machine() not in ("x86_64", "aarch64"), reason="the seccomp filter is for x86_64/arm64"
)


@needs_filter
@pytest.mark.parametrize("workers", ["1", "2"])
def test_auto_refuses_to_start_where_no_isolation_works(tmp_path, workers: str) -> None:
    done = serve(tmp_path, "--workers", workers, wrapper=True)
    line = one_refusal(done)
    assert "isolation" in line and "ANALYST_ENV_ISOLATION=none" in line
    for mode in ("full", "userns", "landlock"):
        assert f"{mode}: " in line, line
    assert "analyst_env serving" not in done.stdout


@needs_filter
def test_an_explicit_mode_that_does_not_work_refuses_in_one_line(tmp_path) -> None:
    done = serve(tmp_path, "--workers", "1", "--isolation", "landlock", wrapper=True)
    assert "isolation landlock" in one_refusal(done)


def test_landlock_without_signal_scoping_refuses_in_one_line(tmp_path) -> None:
    # A kernel older than 6.12 (Landlock ABI 5 and below) cannot scope signals: a landlock
    # kernel of the server's uid could kill the server and reach the host's abstract sockets.
    older = tmp_path / "older-kernel"
    older.mkdir()
    (older / "sitecustomize.py").write_text(
        "from analyst_env.envs.local import landlock\nlandlock.abi = lambda: 5\n"
    )
    done = serve(
        tmp_path,
        "--workers",
        "1",
        "--isolation",
        "landlock",
        "--per-process-limits",
        extra_env={"PYTHONPATH": str(older)},
    )
    line = one_refusal(done)
    assert "isolation landlock" in line and "Landlock ABI 5" in line, line


def other_architecture(tmp_path: Path) -> dict[str, str]:
    """An environment whose interpreters see a machine with no seccomp filter table."""
    other = tmp_path / "other-arch"
    other.mkdir(exist_ok=True)
    (other / "sitecustomize.py").write_text(
        "from analyst_env.envs.local import seccomp\nseccomp.supported = lambda: False\n"
    )
    return {"PYTHONPATH": str(other)}


def test_landlock_without_a_seccomp_filter_refuses_in_one_line(tmp_path) -> None:
    # Without a network namespace only the socket and IPC filters keep a landlock kernel off
    # the host's network and System V IPC; where the architecture has no filter table the
    # mode must not serve without them.
    done = serve(
        tmp_path,
        "--workers",
        "1",
        "--isolation",
        "landlock",
        "--per-process-limits",
        extra_env=other_architecture(tmp_path),
    )
    line = one_refusal(done)
    assert "isolation landlock" in line and "seccomp filter" in line, line


def test_the_probe_fails_landlock_without_a_seccomp_filter(tmp_path) -> None:
    # ``auto`` reaches landlock through the probe, not the static check: the probe's kernel
    # must fail, so ``auto`` moves on (and refuses when nothing else works).
    env = {**os.environ, **other_architecture(tmp_path), "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "analyst_env.envs.local.probe",
            "--mode",
            "landlock",
            "--host-root",
            str(tmp_path),
        ],
        env=env,
        cwd="/",
        capture_output=True,
        text=True,
        timeout=120,
    )
    verdict = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert verdict, done.stdout + done.stderr
    assert '"ok": false' in verdict[-1] and "no seccomp filter" in verdict[-1], verdict[-1]


def test_none_is_refused_beyond_loopback(tmp_path) -> None:
    done = serve(
        tmp_path, "--workers", "1", "--isolation", "none", "--host", "0.0.0.0", "--token", "t"
    )
    line = one_refusal(done)
    assert "isolation none" in line and "loopback only" in line and "'0.0.0.0'" in line


def test_none_is_refused_with_builds_on(tmp_path) -> None:
    done = serve(tmp_path, "--workers", "1", "--isolation", "none", "--allow-builds")
    line = one_refusal(done)
    assert "isolation none" in line and "--allow-builds" in line


def test_none_on_loopback_serves_unconfined_and_says_so(tmp_path) -> None:
    token = "tok-fail-closed"
    with ServeProcess(tmp_path, "--isolation", "none", "--token", token) as server:
        auth = {"Authorization": f"Bearer {token}"}
        protections = httpx.get(f"{server.url}/sandbox", headers=auth, timeout=10).json()[
            "protections"
        ]
        assert protections["isolation"] == "none" and protections["unconfined"] is True
        assert "UNCONFINED" in protections["warning"]
        assert protections["verified"] == "nothing (unconfined)"
        health = httpx.get(f"{server.url}/health", timeout=10).json()["sandbox"]
        assert health["isolation"] == "none" and health["unconfined"] is True
        assert health["warning"] == protections["warning"]
        built = httpx.post(f"{server.url}/envs", headers=auth, json={"name": "x"}, timeout=10)
        assert built.status_code == 403 and "isolation none" in built.text
        log = server.log()
    assert "WARNING: isolation none: episodes run UNCONFINED" in log
    assert "isolation none" in log
