"""``landlock`` isolation: what an unprivileged container without namespaces still gets.

The first tests run the backend in ``landlock`` mode in this process. The last
one recreates a container's situation for real: a process with no capabilities
(``no_new_privs`` keeps exec from giving any back), under a seccomp filter
that refuses ``unshare`` and namespace ``clone`` flags (what Docker's default
profile does), starts a backend with ``isolation=auto``. (It keeps uid 0 rather
than switching to an unprivileged uid because this machine's interpreter lives
under ``/root``; the published-image test runs the same as uid 1000.)
The probe must find every namespace mode unusable and choose ``landlock``, and
the episode must still be confined: no server code, no token, no signal to the
server or another episode, no TCP, nothing outside its working directory.
"""

from __future__ import annotations

import ast
import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest

from analyst_env.envs.local import LocalSandboxBackend, landlock

pytestmark = pytest.mark.skipif(
    landlock.abi() < 6, reason="needs Landlock ABI >= 6 (signal scoping)"
)


def value(sandbox, code: str) -> str:
    result = sandbox.run_cell(code, timeout_s=30)
    assert result.error is None, result.error
    return result.outputs[0]["text/plain"] if result.outputs else ""


def refused(sandbox, code: str) -> str:
    result = sandbox.run_cell(code, timeout_s=30)
    assert result.error is not None, f"{code!r} was allowed: {result.outputs}"
    return result.error.name


@pytest.fixture(scope="module")
def backend():
    backend = LocalSandboxBackend(isolation="landlock", standbys=0, per_process_limits=True)
    yield backend
    backend.close()


def test_real_work_runs(backend, tmp_path) -> None:
    (tmp_path / "sales.csv").write_text("region,amount\nN,1\nS,2\n")
    sandbox = backend.start("default", files={"sales.csv": str(tmp_path / "sales.csv")})
    try:
        assert (
            value(sandbox, "import pandas as pd\nint(pd.read_csv('sales.csv').amount.sum())") == "3"
        )
        assert (
            value(
                sandbox,
                'import duckdb\nduckdb.sql("select sum(amount) from '
                "'sales.csv'\").fetchall()[0][0]",
            )
            == "3"
        )
        plot = sandbox.run_cell(
            "import matplotlib.pyplot as plt\nplt.plot([1, 2]); plt.show()", timeout_s=30
        )
        assert any("image/png" in o for o in plot.outputs)
        shell = sandbox.run_shell("echo hi > out.txt && cat out.txt && ls /tmp; true", timeout_s=10)
        assert shell.stdout.startswith("hi\n")
        assert (
            value(
                sandbox,
                "import tempfile, os\nos.path.dirname(tempfile.mkstemp()[1]) == "
                "os.environ['TMPDIR']",
            )
            == "True"
        )
    finally:
        sandbox.close()


def test_nothing_outside_the_slot_is_reachable(backend) -> None:
    sandbox = backend.start("default", files={})
    other = backend.start("default", files={})
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    try:
        other.run_cell("open('secret.txt', 'w').write('s3cret')", timeout_s=10)
        assert (
            refused(sandbox, f"open({other.workdir + '/secret.txt'!r}).read()") == "PermissionError"
        )
        assert refused(sandbox, "open('/tmp/planted', 'w')") == "PermissionError"
        assert (
            refused(sandbox, "import os\nos.listdir(os.path.expanduser('~root'))")
            == "PermissionError"
        )
        assert refused(sandbox, f"import os\nos.kill({other.kernel_pid}, 9)") == "PermissionError"
        assert refused(sandbox, f"os.kill({os.getpid()}, 15)") == "PermissionError"
        port = listener.getsockname()[1]
        assert (
            refused(
                sandbox,
                f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)",
            )
            == "OSError"
        )
        assert refused(sandbox, "import analyst_env.datasets.starter_set") in {
            "PermissionError",
            "ModuleNotFoundError",
        }
        assert value(other, "open('secret.txt').read()") == "'s3cret'"
    finally:
        listener.close()
        sandbox.close()
        other.close()


HOST_IPC = textwrap.dedent(
    """
    import ctypes, os
    libc = ctypes.CDLL(None, use_errno=True)
    IPC_CREAT, O_CREAT, O_RDWR = 0o1000, 0o100, 0o2
    calls = {
        "shmget": lambda: libc.shmget(0x5EED0, 4096, IPC_CREAT | 0o666),
        "msgget": lambda: libc.msgget(0x5EED1, IPC_CREAT | 0o666),
        "semget": lambda: libc.semget(0x5EED2, 1, IPC_CREAT | 0o666),
        "mq_open": lambda: libc.mq_open(b"/analyst-probe", O_CREAT | O_RDWR, 0o666, None),
    }
    made = {}
    for name, call in calls.items():
        ctypes.set_errno(0)
        made[name] = (call(), os.strerror(ctypes.get_errno()))
    removers = {
        "shmget": lambda i: libc.shmctl(i, 0, None),
        "msgget": lambda i: libc.msgctl(i, 0, None),
        "semget": lambda i: libc.semctl(i, 0, 0),
        "mq_open": lambda i: libc.mq_unlink(b"/analyst-probe"),
    }
    for name, (result, _) in made.items():
        if result >= 0:  # IPC_RMID: the host keeps nothing even where this test fails
            removers[name](result)
    made
    """
)


def test_no_ipc_object_outlives_the_episode_in_the_hosts_namespace(backend) -> None:
    # Without an IPC namespace of its own, a kernel's SysV segment, queue or semaphore set (and
    # a POSIX message queue) would live in the host's: it survives the episode and the server,
    # holds memory no limit counts once detached, and is there for the next episode to open.
    sandbox = backend.start("default", files={})
    try:
        made = ast.literal_eval(value(sandbox, HOST_IPC))
    finally:
        sandbox.close()
    assert {name: result for name, (result, _) in made.items()} == dict.fromkeys(made, -1), made


UNPRIVILEGED = textwrap.dedent(
    """
    import json, os, sys
    from analyst_env.envs.local import seccomp
    seccomp.set_no_new_privs()
    # like Docker's default profile: no unshare, no CLONE_NEW*
    seccomp.install(seccomp.build_filter())
    from analyst_env.envs.local.confine_steps import drop_capabilities
    drop_capabilities()
    os.environ["HOME"] = "/nonexistent"
    os.environ["ANALYST_ENV_TOKEN"] = "tok-9d2b71"
    from analyst_env.envs.local import LocalSandboxBackend
    backend = LocalSandboxBackend(isolation="auto", standbys=0, per_process_limits=True)
    report = {"protections": backend.protections()}
    first, second = backend.start("default", files={}), backend.start("default", files={})
    def run(sb, code):
        r = sb.run_cell(code, timeout_s=30)
        return r.error.name if r.error else (r.outputs[0]["text/plain"] if r.outputs else "")
    report["work"] = run(first, "import pandas as pd\\nint(pd.DataFrame({'a': [1, 2]}).a.sum())")
    report["token_in_env"] = run(first, "import os\\n'tok-9d2b71' in repr(dict(os.environ))")
    report["server_environ"] = run(first, f"open('/proc/{os.getpid()}/environ').read()")
    report["kill_server"] = run(first, f"os.kill({os.getpid()}, 15)")
    report["kill_other"] = run(first, f"os.kill({second.kernel_pid}, 9)")
    report["other_alive"] = run(second, "1 + 1")
    first.close(); second.close(); backend.close()
    print("REPORT" + json.dumps(report))
    """
)


@pytest.mark.skipif(
    os.geteuid() != 0, reason="dropping capabilities to recreate a container needs root"
)
def test_a_server_without_capabilities_or_namespaces_gets_landlock_and_stays_confined() -> None:
    done = subprocess.run(
        [sys.executable, "-P", "-c", UNPRIVILEGED],
        capture_output=True,
        text=True,
        timeout=300,
        cwd="/",
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("REPORT")]
    assert lines, done.stderr[-3000:]
    report = json.loads(lines[0][len("REPORT") :])
    protections = report["protections"]
    assert protections["isolation"] == "landlock"
    assert "userns" in protections["stronger_modes_unavailable"]
    assert report["work"] == "3"
    assert report["token_in_env"] == "False"
    assert report["server_environ"] == "PermissionError"
    assert report["kill_server"] == "PermissionError" and report["kill_other"] == "PermissionError"
    assert report["other_alive"] == "2"
