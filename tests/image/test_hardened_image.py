"""The published image under a hardened `docker run`, and its refusal where no sandbox works.

Hardened: `--read-only --tmpfs /tmp --cap-drop ALL --security-opt no-new-privileges`, the
options docs/publishing.md gives for a host or cluster that hardens containers (issue 32,
item 7: the image used to crash there, writing its state under a read-only root). The
server must serve with a real isolation mode, every tool must work (a cell, SQL, a shell
command, a workbook whose formulas LibreOffice recalculates before scoring), its state
must land in the declared state volume, and nothing may try to write anywhere else (the
logs name no failed write: matplotlib, IPython and fontconfig report theirs).

Refusal: under a seccomp profile that denies namespaces (`unshare`, `setns`, `clone` with
a namespace flag: EPERM) and makes Landlock's syscalls fail with ENOSYS (an older kernel
or Docker), no isolation mode works, and the server must refuse to start rather than
serve episodes unconfined (issue 32, item 1). The profile is seccomp-no-isolation.json
beside this file: Docker's profile format, allowing every other syscall.

The already-built image is reused (tests/docker_engine.py); each test starts its own
container. Skipped, with the reason, where no Docker engine answers.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import probes
import pytest
from docker_engine import Container, docker

from analyst_env.datasets import load_dataset

pytestmark = [pytest.mark.live, pytest.mark.timeout(600)]  # a start-up on a busy machine
TOKEN = "hardened-probe-token-" + os.urandom(12).hex()
HARDENED = [
    "--read-only",
    "--tmpfs",
    "/tmp",
    "--cap-drop",
    "ALL",
    "--security-opt",
    "no-new-privileges",
]
STATE = "/var/lib/analyst_env"
NO_ISOLATION_PROFILE = Path(__file__).with_name("seccomp-no-isolation.json")
# What the server, its zygotes and LibreOffice print when a write outside the state
# volume and /tmp is refused.
FAILED_WRITES = (
    "Read-only file system",
    "Permission denied",
    "not a writable location",  # IPython
    "temporary cache directory",  # matplotlib
    "No writable cache directories",  # fontconfig
)
WORKBOOK_TASK = "starter-sales-wb-000"


def _start(image: str, options: list[str], prefix: str) -> tuple[Container, probes.Target]:
    container = Container(image, options, TOKEN, prefix=prefix)
    target = probes.Target(
        url=container.url,
        token=TOKEN,
        secret_paths=["/app/env", "/var/cache/analyst_env", STATE],
        listen_addresses=[("127.0.0.1", 8000)],
        protected_write_dirs=["/", "/etc", "/home", "/var/tmp", "/var/cache/analyst_env", STATE],
        exists_on_server=container.exists,
        server_alive=container.running,
    )
    try:
        probes.wait_healthy(target, 180)
    except AssertionError as exc:
        logs = container.logs()
        container.remove()
        pytest.fail(f"{exc}; last log lines:\n{logs}")
    return container, target


@pytest.fixture(scope="module")
def hardened(image):
    container, target = _start(image, HARDENED, "hardened")
    try:
        yield container, target
    finally:
        print(f"--- hardened: last log lines ---\n{container.logs()}")
        container.remove()


def _workbook_with_formulas_code() -> str:
    """The workbook task's oracle, with every number written as a formula (``=21``).

    openpyxl saves formulas without values, so the scorer can only see the right cells if
    LibreOffice recalculates the workbook: a reward of 1 shows recalculation works here.
    """
    task = next(t for t in load_dataset("starter").tasks if t.id == WORKBOOK_TASK)
    code = task.oracle_steps[0].arguments["code"]
    appended = "        ws.append(row)"
    assert appended in code, "the workbook oracle changed: adapt this test"
    as_formulas = (
        "        ws.append([f'={v!r}' if isinstance(v, (int, float)) and not isinstance(v, bool)"
        " else v for v in row])"
    )
    return code.replace(appended, as_formulas)


def test_hardened_run_serves_with_a_real_isolation(hardened):
    container, target = hardened
    report = probes.sandbox_report(target)
    assert report["protections"]["isolation"] == "landlock", report
    uid = container.exec("sh", "-c", "grep ^Uid /proc/1/status")
    assert uid.stdout.split()[1] == "1000", uid.stdout
    root = container.exec("sh", "-c", "touch /probe-root-write")
    assert root.returncode != 0, "the root filesystem is writable: --read-only did not apply"


def test_hardened_run_scores_an_episode_with_every_tool(hardened):
    """A cell and final_answer; SQL; a shell command; a workbook recalculated by LibreOffice."""
    _, target = hardened
    probes.probe_episode_scores(target)
    with target.session() as env:
        env.reset(task_id="starter-retail-000", seed=0)
        out = env.run_sql("SELECT COUNT(*) AS n_orders FROM orders").observation.text
        assert "n_orders" in out and re.search(r"\b\d+\b", out), out
        out = probes.shell(env, "ls && echo shell-ok")
        assert "retail.sqlite" in out and "shell-ok" in out, out
    with target.session() as env:
        env.reset(task_id=WORKBOOK_TASK, seed=0)
        out = probes.cell(env, _workbook_with_formulas_code())
        assert "saved" in out and "Traceback" not in out, out
        done = env.final_answer("done")
        assert done.done is True
        assert done.reward == 1.0, done.observation.text


def test_hardened_run_keeps_its_state_in_the_declared_volume(hardened):
    """Trajectories and the environments database are in a volume Docker made for the
    state directory (none was given), and nothing tried to write elsewhere."""
    container, target = hardened
    probes.probe_episode_scores(target)
    mounts = {m["Destination"]: m for m in container.inspect()["Mounts"]}
    assert mounts.get(STATE, {}).get("Type") == "volume", mounts
    listed = container.exec("sh", "-c", f"ls {STATE} {STATE}/trajectories | head -20")
    assert "envs" in listed.stdout and ".jsonl" in listed.stdout, listed.stdout + listed.stderr
    logs = container.logs(tail=2000)
    failed = [line for line in logs.splitlines() if any(s in line for s in FAILED_WRITES)]
    assert not failed, f"writes refused under --read-only: {failed[:8]}"


def test_hardened_run_keeps_cells_confined(hardened):
    """The probes that differ with a read-only root: writes, server files, the token, kills."""
    _, target = hardened
    probes.probe_writes_confined(target)
    probes.probe_server_files_unreadable(target)
    probes.probe_token_unreadable(target)
    probes.probe_server_survives_kill_attempts(target)  # last: it may end the server


def test_state_on_a_tmpfs_owned_by_the_image_user_serves(image):
    """`--tmpfs /var/lib/analyst_env:uid=1000,gid=1000` (docs/publishing.md) serves and
    records there; a tmpfs without those options is root's, and the server cannot write it."""
    container, target = _start(
        image, [*HARDENED, "--tmpfs", f"{STATE}:uid=1000,gid=1000"], "tmpfs-state"
    )
    try:
        mounts = {m["Destination"] for m in container.inspect()["Mounts"]}
        assert STATE not in mounts, "a volume was made although a tmpfs was given"
        probes.probe_episode_scores(target)
        listed = container.exec("sh", "-c", f"ls {STATE}/trajectories")
        assert ".jsonl" in listed.stdout, listed.stdout + listed.stderr
    finally:
        container.remove()


def test_refuses_to_start_where_no_isolation_works(image):
    """Namespaces denied, Landlock missing: the server exits non-zero, saying why, instead of
    serving episodes that could read the token and the gold and kill it."""
    container = Container(
        image,
        ["--security-opt", f"seccomp={NO_ISOLATION_PROFILE}"],
        TOKEN,
        prefix="no-isolation",
    )
    try:
        deadline = time.monotonic() + 180
        state = container.inspect()["State"]
        while state["Running"] and time.monotonic() < deadline:
            time.sleep(2)
            state = container.inspect()["State"]
        logs = container.logs()
        assert not state["Running"], f"still serving after 180 s:\n{logs}"
        assert state["ExitCode"] != 0, logs
        lines = [line for line in logs.splitlines() if "refusing" in line and "isolation" in line]
        assert lines, f"no refusal naming the isolation in the logs:\n{logs}"
    finally:
        container.remove()


def test_the_no_isolation_profile_denies_what_it_says(image):
    """Control for the refusal test: under the profile, namespaces fail with EPERM and
    Landlock with ENOSYS, while ordinary forks work."""
    code = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "def err(r):\n"
        "    return 0 if r == 0 else ctypes.get_errno()\n"
        "print(err(libc.unshare(0x10000000)), err(libc.syscall(444, None, 0, 1)))\n"
        "pid = os.fork()\n"
        "os._exit(0) if pid == 0 else print(os.waitpid(pid, 0)[1])\n"
    )
    ran = docker(
        "run",
        "--rm",
        "--security-opt",
        f"seccomp={NO_ISOLATION_PROFILE}",
        "--entrypoint",
        "python",
        image,
        "-c",
        code,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["1", "38", "0"], ran.stdout  # EPERM, ENOSYS, fork exit 0
