"""Isolation of the local sandbox: namespaces, private root, per-slot uid, seccomp, cgroups,
standbys.

Real kernels, real attacks from inside them. Tests that need root (per-slot uid,
cgroups) skip with the reason when the test process is not root.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import time

import pytest
from support import PID_NAMESPACE_OF_CELL, host_pid, wait_dead

from analyst_env.envs.local import LocalSandbox, LocalSandboxBackend, landlock
from analyst_env.envs.local.isolation import Sizing
from analyst_env.envs.sandbox import SandboxError

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(
    not ROOT, reason="per-slot uids and cgroups need the server to run as root"
)
SERVER_FILE = os.path.realpath(
    os.path.join(os.path.dirname(__file__), "..", "..", "server", "app.py")
)


def value(sandbox: LocalSandbox, code: str) -> str:
    result = sandbox.run_cell(code, timeout_s=20)
    assert result.error is None, result.error
    return result.outputs[-1]["text/plain"]


@needs_root
def test_protections_report_full_isolation(backend: LocalSandboxBackend) -> None:
    info = backend.protections()
    assert info["isolation"] == "full"
    for key in (
        "network_namespace",
        "mount_namespace",
        "private_root",
        "per_slot_uid",
        "no_new_privs",
        "seccomp",
    ):
        assert info[key] is True, key
    assert "NPROC" in str(info["rlimits"])
    assert set(info) >= {
        "cgroup_memory",
        "cgroup_pids",
        "cgroup_cpu",
        "cgroup_kill",
        "kill",
        "standbys",
    }


def test_no_network_but_loopback(sandbox: LocalSandbox) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        out = value(
            sandbox,
            "import socket\n"
            "s = socket.socket(); s.settimeout(2)\n"
            f"try:\n    s.connect(('127.0.0.1', {port})); r = 'connected'\n"
            "except OSError as e:\n    r = type(e).__name__\n"
            "r",
        )
    assert out == "'ConnectionRefusedError'"  # its own loopback, where nothing listens
    assert value(sandbox, "[n for _, n in socket.if_nameindex()]") == "['lo']"
    dns = value(
        sandbox,
        "try:\n    socket.getaddrinfo('pypi.org', 443); r = 'resolved'\nexcept OSError as "
        "e:\n    r = 'failed'\nr",
    )
    assert dns == "'failed'"


def test_private_root_hides_the_server(sandbox: LocalSandbox, tmp_path) -> None:
    assert os.path.exists(SERVER_FILE)
    assert value(sandbox, f"import os; os.path.exists({SERVER_FILE!r})") == "False"
    assert value(sandbox, f"os.path.exists({str(tmp_path)!r})") == "False"
    assert value(sandbox, "os.path.exists('/root/.cache')") == "False"
    denied = sandbox.run_cell("open('/etc/evil', 'w')", timeout_s=10)
    assert denied.error is not None and denied.error.name in {"OSError", "PermissionError"}
    # ... while the tools a kernel needs still work
    assert (
        value(sandbox, "import duckdb, pandas as pd; duckdb.sql('select 41 + 1').fetchall()[0][0]")
        == "42"
    )
    assert (
        sandbox.run_shell("python -c 'print(6*7)' && ls / >/dev/null", timeout_s=20).stdout
        == "42\n"
    )


@pytest.mark.parametrize("isolation", ["full", "landlock"])
def test_what_else_lies_in_the_servers_venv_is_hidden(isolation, tmp_path) -> None:
    """A venv is exposed as the interpreter's prefix, and people keep other things in it (a
    test's second install of this package with its task catalogue, a server's state)."""
    if isolation == "full" and not ROOT:
        pytest.skip("full isolation needs root")
    if isolation == "landlock" and landlock.abi() < 6:
        pytest.skip("needs Landlock ABI >= 6")
    assert sys.prefix != sys.base_prefix, "the tests run from a venv"
    stray_dir = os.path.join(sys.prefix, f"stray-{tmp_path.name}")
    stray_file = stray_dir + ".jsonl"
    os.makedirs(os.path.join(stray_dir, "datasets"))
    try:
        with open(os.path.join(stray_dir, "datasets", "tasks.jsonl"), "w") as f:
            f.write('{"answer": 42}\n')
        with open(stray_file, "w") as f:
            f.write('{"answer": 42}\n')
        backend = LocalSandboxBackend(isolation=isolation, standbys=0, per_process_limits=True)
        try:
            sandbox = backend.start("default", files={})
            shell = sandbox.run_shell(
                f"cat {stray_dir}/datasets/tasks.jsonl {stray_file}; "
                "python -c 'import pandas; print(6*7)'",
                timeout_s=20,
            )
            assert "answer" not in shell.stdout + shell.stderr
            assert shell.stdout == "42\n"  # the venv itself still works
            sandbox.close()
        finally:
            backend.close()
    finally:
        shutil.rmtree(stray_dir)
        os.unlink(stray_file)


def test_task_files_are_staged_even_when_unreadable_to_the_episode(
    backend: LocalSandboxBackend, tmp_path
) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    source = private / "data.csv"
    source.write_text("a\n1\n2\n")
    source.chmod(0o600)
    sandbox = backend.start(
        "default", files={"data.csv": str(source), "deep/copy.csv": str(source)}
    )
    try:
        assert (
            value(sandbox, "import pandas as pd; int(pd.read_csv('deep/copy.csv').a.sum())") == "3"
        )
        sandbox.run_cell("open('data.csv', 'w').write('changed')", timeout_s=10)
        assert source.read_text() == "a\n1\n2\n"
    finally:
        sandbox.close()


def test_bad_task_files_are_clear_errors(backend: LocalSandboxBackend, tmp_path) -> None:
    with pytest.raises(SandboxError, match="could not open task file"):
        backend.start("default", files={"x.csv": str(tmp_path / "missing.csv")})
    (tmp_path / "ok.csv").write_text("a\n")
    with pytest.raises(SandboxError, match="relative path"):
        backend.start("default", files={"../x.csv": str(tmp_path / "ok.csv")})


@needs_root
def test_episodes_cannot_signal_or_read_each_other_or_the_server(
    backend: LocalSandboxBackend,
) -> None:
    first = backend.start("default", files={})
    second = backend.start("default", files={})
    try:
        uid_1 = int(value(first, "import os; os.getuid()"))
        uid_2 = int(value(second, "import os; os.getuid()"))
        assert uid_1 != uid_2 and 0 not in (uid_1, uid_2)
        first.run_cell("open('secret.txt', 'w').write('s3cret')", timeout_s=10)
        first_pid_inside = int(
            value(first, "os.getpid()")
        )  # as numbered in the sandbox's PID namespace
        for target in (first_pid_inside, first.kernel_pid, 1, os.getpid()):
            out = value(
                second,
                f"try:\n    os.kill({target}, 9); r = 'killed'\nexcept OSError as e:\n    r "
                "= type(e).__name__\nr",
            )
            assert out in {"'PermissionError'", "'ProcessLookupError'"}, (target, out)
        environ = second.run_cell(f"open('/proc/{os.getpid()}/environ').read()", timeout_s=10)
        assert environ.error is not None and environ.error.name in {
            "PermissionError",
            "FileNotFoundError",
        }
        peek = second.run_cell(
            f"open('/proc/{first.kernel_pid}/root{first.workdir}/secret.txt').read()", timeout_s=10
        )
        assert peek.error is not None and peek.error.name in {
            "PermissionError",
            "FileNotFoundError",
        }
        second.run_shell("kill -9 -1", timeout_s=5)  # every process it may signal: only its own
        assert value(first, "1 + 1") == "2"  # still alive
    finally:
        first.close()
        second.close()


def test_a_kernel_sees_no_process_but_its_own(backend: LocalSandboxBackend) -> None:
    """Its own PID namespace and ``hidepid``: no host command line (``serve --token X``) is
    readable."""
    first = backend.start("default", files={})
    second = backend.start("default", files={})
    try:
        first.run_shell("sleep 30 &", timeout_s=5)
        listed = value(
            second, "import os\nsorted(int(p) for p in os.listdir('/proc') if p.isdigit())"
        )
        own = value(second, "[os.getpid()]")
        assert listed == own  # not the server, not the zygote, not the other episode's sleep
        assert value(second, f"os.path.exists(f'/proc/{{{os.getpid()}}}')") == "False"
        cmdlines = second.run_shell("cat /proc/[0-9]*/cmdline | tr '\\0' ' '", timeout_s=5).stdout
        assert "sleep 30" not in cmdlines and "pytest" not in cmdlines
    finally:
        first.close()
        second.close()


def test_seccomp_denies_namespace_and_tracing_calls(sandbox: LocalSandbox) -> None:
    out = value(
        sandbox,
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "calls = {'unshare': libc.unshare(0x10000000), 'ptrace': libc.syscall(101, 16, "
        "os.getppid(), 0, 0)}\n"
        "(calls, ctypes.get_errno())",
    )
    assert out == "({'unshare': -1, 'ptrace': -1}, 1)"
    shell = sandbox.run_shell("unshare -r true; echo rc=$?", timeout_s=10)
    assert "rc=1" in shell.stdout


def test_disk_fill_stops_at_the_tmpfs_size() -> None:
    backend = LocalSandboxBackend(sizing=Sizing(disk_mb=16), standbys=0)
    try:
        sandbox = backend.start("default", files={})
        code = (
            "n = 0\n"
            "try:\n"
            "    with open('fill.bin', 'wb') as f:\n"
            "        while True:\n"
            "            f.write(b'x' * (1 << 20)); f.flush(); n += 1\n"
            "except OSError as e:\n"
            "    r = (type(e).__name__, e.errno)\n"
            "(r, n <= 16)"
        )
        out = sandbox.run_cell(code, timeout_s=30)
        assert out.error is None, out.error
        assert out.outputs[-1]["text/plain"] in {
            "(('OSError', 28), True)",
            "(('OSError', 27), True)",
        }
        assert (
            sandbox.run_shell(
                "rm fill.bin && echo ok > after.txt && cat after.txt", timeout_s=10
            ).stdout
            == "ok\n"
        )
        sandbox.close()
    finally:
        backend.close()


@needs_root
def test_setsid_double_fork_dies_with_the_episode(backend: LocalSandboxBackend) -> None:
    sandbox = backend.start("default", files={})
    code = (
        "import os, time\n"
        "r, w = os.pipe()\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        os.write(w, str(os.getpid()).encode()); time.sleep(1000)\n"
        "    os._exit(0)\n"
        "int(os.read(r, 32))"
    )
    escapee = host_pid(value(sandbox, PID_NAMESPACE_OF_CELL).strip("'"), int(value(sandbox, code)))
    assert not wait_dead(escapee, timeout_s=0.2)
    sandbox.close()
    assert wait_dead(escapee)


def test_standby_is_handed_out_and_seeded(backend: LocalSandboxBackend) -> None:
    backend.warm_up()
    deadline = time.monotonic() + 20
    while not backend._ready.get("default") and time.monotonic() < deadline:
        time.sleep(0.05)
    standby_pid = backend._ready["default"][0][0].pid
    first = backend.start("default", files={}, seed=3)
    try:
        assert first.kernel_pid == standby_pid
        draw = "import numpy as np, random; (np.random.rand(), random.random())"
        second = backend.start("default", files={}, seed=3)
        try:
            assert value(first, draw) == value(second, draw)
        finally:
            second.close()
    finally:
        first.close()


@pytest.mark.skipif(
    not ROOT,
    reason="simulates the unprivileged path from root (a user namespace without host privileges)",
)
def test_user_namespace_fallback() -> None:
    backend = LocalSandboxBackend(isolation="userns", standbys=1, per_process_limits=True)
    try:
        info = backend.protections()
        assert info["isolation"] == "userns"
        assert info["per_slot_uid"] is False and info["cgroup_memory"] is False
        assert info["memory_limit"] == "per process (RLIMIT_AS)"
        sandbox = backend.start("default", files={})
        assert value(sandbox, f"import os; os.path.exists({SERVER_FILE!r})") == "False"
        assert value(sandbox, "import socket; [n for _, n in socket.if_nameindex()]") == "['lo']"
        assert value(sandbox, "import pandas as pd; int(pd.Series([1, 2]).sum())") == "3"
        sandbox.close()
    finally:
        backend.close()


@pytest.mark.skipif(
    not ROOT,
    reason="simulates the unprivileged path from root (a user namespace without host privileges)",
)
def test_user_namespace_episodes_share_a_uid_but_not_files_or_signals() -> None:
    """In ``userns`` every kernel has the same uid: the slot view and Landlock scoping keep them
    apart."""
    backend = LocalSandboxBackend(isolation="userns", standbys=0, per_process_limits=True)
    try:
        victim, attacker = backend.start("default", files={}), backend.start("default", files={})
        victim.run_cell("open('secret.txt', 'w').write('s3cret')", timeout_s=10)
        victim_inside = int(value(victim, "import os; os.getpid()"))
        targets = [
            victim.workdir + "/secret.txt",
            f"/proc/{victim_inside}/cwd/secret.txt",
            f"/proc/{victim_inside}/environ",
        ]
        out = value(
            attacker,
            "import os, glob\nseen = [sorted(os.listdir('/slots'))]\n"
            f"for path in {targets!r}:\n"
            "    try:\n        open(path).read(); seen.append('READ')\n"
            "    except OSError as e:\n        seen.append(type(e).__name__)\n"
            f"for pid in [{victim_inside}, 1]:\n"
            "    try:\n        os.kill(pid, 9); seen.append('KILLED')\n"
            "    except OSError as e:\n        seen.append(type(e).__name__)\n"
            "seen",
        )
        assert "READ" not in out and "KILLED" not in out, out
        assert out.startswith(
            f"[[{os.path.basename(os.path.dirname(attacker.workdir))!r}]"
        )  # only its own slot
        attacker.run_shell("kill -9 -1", timeout_s=5)
        assert value(victim, "open('secret.txt').read()") == "'s3cret'"
        third = backend.start("default", files={})  # the zygote still forks
        assert value(third, "1 + 1") == "2"
        third.close()
        victim.close()
        attacker.close()
    finally:
        backend.close()


@pytest.mark.skipif(
    not ROOT,
    reason="simulates the unprivileged path from root (a user namespace without host privileges)",
)
def test_user_namespace_kernels_cannot_write_the_proc_files_of_their_zygote_or_neighbours() -> None:
    """Same uid, so the /proc files of the zygote and of another episode's kernel are the
    attacker's by ownership: an ``oom_score_adj`` of 1000 makes the neighbour the OOM killer's
    first victim, an ``autogroup`` nice of 19 starves it."""
    backend = LocalSandboxBackend(isolation="userns", standbys=0, per_process_limits=True)
    try:
        victim, attacker = backend.start("default", files={}), backend.start("default", files={})
        victim_inside = int(value(victim, "import os; os.getpid()"))
        out = value(
            attacker,
            "import os\nwrote = []\n"
            f"for pid in [{victim_inside}, 1]:\n"
            "    for name, text in (('oom_score_adj', '1000'), ('autogroup', '19'),\n"
            "                       ('coredump_filter', '0x7f'), ('clear_refs', '5')):\n"
            "        try:\n            open(f'/proc/{pid}/{name}', 'w').write(text)\n"
            "            wrote.append(f'{pid}/{name}')\n"
            "        except OSError:\n            pass\n"
            "wrote",
        )
        assert out == "[]", out
        assert value(victim, "open('/proc/self/oom_score_adj').read()") == "'0\\n'"
        assert value(victim, "open('out.txt', 'w').write('ok')") == "2"  # its own files still
        shell = victim.run_shell(
            "echo hi > /dev/null && echo hi > /tmp/x && cat /tmp/x", timeout_s=10
        )
        assert shell.stdout == "hi\n", shell
        victim.close()
        attacker.close()
    finally:
        backend.close()


def test_invalid_configuration_is_rejected() -> None:
    with pytest.raises(ValueError, match="isolation mode"):
        LocalSandboxBackend(isolation="chroot")
    with pytest.raises(ValueError, match="sizing"):
        Sizing(memory_mb=1)
    with pytest.raises(ValueError, match="standbys"):
        LocalSandboxBackend(standbys=-1)


def test_system_trees_and_their_submounts_are_read_only(sandbox: LocalSandbox) -> None:
    out = value(
        sandbox,
        "import os\nwritable = []\n"
        "for line in open('/proc/self/mountinfo'):\n"
        "    fields = line.split()\n"
        "    point, options = fields[4], fields[5].split(',')\n"
        "    if point.startswith(('/sys', '/usr', '/etc')) and 'rw' in options:\n"
        "        writable.append(point)\n"
        "writable",
    )
    assert out == "[]"


def test_io_uring_is_denied(sandbox: LocalSandbox) -> None:
    out = value(
        sandbox,
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "params = ctypes.create_string_buffer(120)\n"
        "(libc.syscall(425, 4, params), ctypes.get_errno())",
    )
    assert out == "(-1, 1)"
