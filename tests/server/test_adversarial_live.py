"""Adversarial suite: real attacks run as cells in live episodes against a live uvicorn server.

Each attack runs in an episode while a bystander episode is open. For every
attack the cell gets a clear error or harmless output, the attacked episode is
usable afterwards (or ended with a message), and the server and the bystander
keep working. The server runs with small sizes (512 MB, 64 pids, 32 MB disk)
so the limits are reached quickly. Attacks that rely on root-only protections
(per-slot uid, cgroups) skip with the reason when the tests do not run as root.
"""

from __future__ import annotations

import os
import time

import httpx
import pytest
from support import PID_NAMESPACE_OF_CELL, host_pid, wait_dead

from analyst_env.client import AnalystEnv
from analyst_env.server.app import build_app
from analyst_env.server.local_server import BackgroundServer
from analyst_env.server.runtime import Runtime
from analyst_env.server.settings import Settings

pytestmark = pytest.mark.live
ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(
    not ROOT, reason="per-slot uids and cgroups need the server to run as root"
)
SERVER_FILE = os.path.realpath(
    os.path.join(os.path.dirname(__file__), "..", "..", "server", "app.py")
)


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("state")


@pytest.fixture(scope="module")
def server(tiny_dataset, state_dir):
    settings = Settings(
        state_dir=str(state_dir),
        cell_timeout_s=5.0,
        shell_timeout_s=5.0,
        output_limit_chars=2_000,
        max_sessions=8,
        memory_limit_mb=512,
        pids_limit=64,
        disk_limit_mb=32,
        standbys=2,
    )
    runtime = Runtime(settings, datasets=[tiny_dataset])
    try:
        with BackgroundServer(build_app(settings, runtime=runtime)) as url:
            yield url
    finally:
        runtime.close()


class Bystander:
    """An episode open next to every attack; re-reset when its step budget runs low."""

    def __init__(self, env) -> None:
        self.env = env
        self.steps = 0

    def check(self) -> str:
        if self.steps == 0 or self.steps >= 6:
            self.env.reset(task_id="tiny-csv")
            self.steps = 1
            cell(self.env, "import pandas as pd\ndf = pd.read_csv('sales.csv')")
        self.steps += 1
        return cell(self.env, "float(df.amount.sum())")


@pytest.fixture(scope="module")
def bystander(server):
    with AnalystEnv(base_url=server).sync() as env:
        by = Bystander(env)
        by.check()
        yield by


@pytest.fixture
def episode(server, bystander):
    with AnalystEnv(base_url=server).sync() as env:
        env.reset(task_id="tiny-verify-hooks")  # has sales.csv and 40 steps
        yield env
    # Whatever the attack did, the server and the bystander still work.
    assert httpx.get(server + "/health", timeout=10).status_code == 200
    assert bystander.check() == "7319.25"


def cell(env, code: str) -> str:
    return env.add_and_execute_code_cell(code).observation.text


def test_sandbox_route_reports_protections(server):
    body = httpx.get(server + "/sandbox", timeout=10).json()
    assert body["backend"] == "local"
    assert body["protections"]["network_namespace"] is True
    assert body["protections"]["seccomp"] is True
    assert body["protections"]["pid_namespace"] is True and body["protections"]["degraded"] == ""
    metadata = httpx.get(server + "/metadata", timeout=10).json()
    assert "isolation=" in metadata["description"]
    health = httpx.get(server + "/health", timeout=10).json()
    assert health["status"] == "healthy"
    assert health["sandbox"] == {
        "backend": "local",
        "isolation": body["protections"]["isolation"],
        "degraded": "",
        "verified": body["protections"]["verified"],
    }
    assert "cgroup limits written" in health["sandbox"]["verified"]


@needs_root
def test_fork_bomb_hits_the_pids_limit(server, bystander):
    with AnalystEnv(base_url=server).sync() as episode:
        episode.reset(task_id="tiny-csv")
        kids = _fork_bomb(episode)
    assert all(wait_dead(pid) for pid in kids)  # the episode's end killed them all
    assert bystander.check() == "7319.25"


def _fork_bomb(episode) -> list[int]:
    out = cell(
        episode,
        "import os, time\nkids = []\n"
        "try:\n"
        "    while True:\n"
        "        pid = os.fork()\n"
        "        if pid == 0:\n"
        "            time.sleep(1000); os._exit(0)\n"
        "        kids.append(pid)\n"
        "except OSError as e:\n"
        "    print('stopped:', type(e).__name__, len(kids) < 64)",
    )
    assert "stopped: BlockingIOError True" in out
    namespace = cell(episode, f"print({PID_NAMESPACE_OF_CELL})").strip()
    kids = [host_pid(namespace, int(p)) for p in cell(episode, "print(*kids[:8])").split()]
    assert cell(episode, "1 + 1") == "2"
    assert not wait_dead(kids[0], timeout_s=0.1)
    return kids


def test_memory_bomb_is_an_error_not_a_crash(episode):
    out = cell(episode, "import numpy as np\nhog = [np.ones(50_000_000) for _ in range(40)]")
    assert "MemoryError" in out or "kernel was restarted" in out
    assert cell(episode, "2 * 21") == "42"


@needs_root
def test_memory_bomb_across_processes_is_stopped_by_the_cgroup(episode):
    # Two children of 300 MB each stay under the per-process limit but not under
    # the episode's 512 MB cgroup: the OOM killer ends one, the kernel survives.
    # The cell only starts them; later cells poll, so a loaded machine cannot time it out.
    started = cell(
        episode,
        "import os, numpy as np\nready_r, ready_w = os.pipe()\nhold_r, hold_w = "
        "os.pipe()\npids = []\n"
        "for _ in range(2):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        a = np.ones(37_500_000); os.write(ready_w, b'+'); os.read(hold_r, 1); "
        "os._exit(0)\n"
        "    pids.append(pid)\n"
        "os.set_blocking(ready_r, False)\nready, killed = b'', False\n"
        "def poll():\n"
        "    global ready, killed\n"
        "    for p in pids:\n"
        "        done, status = os.waitpid(p, os.WNOHANG)\n"
        "        killed = killed or bool(done and status & 0x7F == 9)\n"
        "    try:\n        ready += os.read(ready_r, 8)\n    except "
        "BlockingIOError:\n        pass\n"
        "    return 'oom-killed' if killed else 'both allocated' if len(ready) >= 2 else "
        "'pending'\n"
        "len(pids)",
    )
    assert started == "2"
    deadline = time.monotonic() + 60
    state = "'pending'"
    while state == "'pending'" and time.monotonic() < deadline:
        time.sleep(0.2)
        state = cell(episode, "poll()")
    assert state == "'oom-killed'"
    cell(
        episode,
        "for p in pids:\n    try:\n        os.kill(p, 9)\n    except "
        "ProcessLookupError:\n        pass",
    )
    assert cell(episode, "3 * 3") == "9"


def test_cpu_spin_past_the_timeout(episode):
    out = cell(episode, "while True: pass")
    assert "TIMEOUT" in out
    out = cell(
        episode, "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass"
    )
    assert "TIMEOUT" in out and "restarted" in out
    assert cell(episode, "'alive'") == "'alive'"


def test_disk_fill_ends_in_enospc(episode):
    out = cell(
        episode,
        "with open('fill.bin', 'wb') as f:\n    while True:\n        f.write(b'x' * "
        "2**20); f.flush()",
    )
    assert "OSError" in out and ("No space left" in out or "too large" in out)
    assert "0" in episode.execute_shell_command("rm fill.bin; echo $?").observation.text
    assert cell(episode, "open('sales.csv').readline().strip()") == "'region,amount'"


def test_network_egress_is_impossible(server, episode):
    port = int(server.rsplit(":", 1)[1])
    out = cell(
        episode,
        "import socket\nresults = []\n"
        f"for target in [('127.0.0.1', {port}), ('10.0.0.1', 80)]:\n"
        "    try:\n"
        "        socket.create_connection(target, timeout=2); results.append('connected')\n"
        "    except OSError as e:\n"
        "        results.append(type(e).__name__)\n"
        "try:\n    socket.getaddrinfo('pypi.org', 443); results.append('resolved')\n"
        "except OSError:\n    results.append('no dns')\n"
        "results",
    )
    assert "connected" not in out and "resolved" not in out
    assert "ConnectionRefusedError" in out and "no dns" in out


def test_server_files_and_environment_are_unreadable(episode):
    out = cell(episode, f"import os\nos.path.exists({SERVER_FILE!r})")
    assert out == "False"
    out = cell(episode, f"open('/proc/{os.getpid()}/environ').read()")
    assert "PermissionError" in out or "FileNotFoundError" in out


@needs_root
def test_another_episode_cannot_be_read_signalled_or_traced(server, episode):
    with AnalystEnv(base_url=server).sync() as victim:
        victim.reset(task_id="tiny-csv")
        cell(victim, "open('secret.txt', 'w').write('s3cret')")
        victim_pid = int(cell(victim, "import os; os.getpid()"))
        victim_dir = cell(victim, "os.getcwd()").strip("'")
        out = cell(
            episode,
            "import os, ctypes, signal\nlibc = ctypes.CDLL(None, use_errno=True)\nseen = []\n"
            f"for path in ['/proc/{victim_pid}/cwd/secret.txt', '{victim_dir}/secret.txt', "
            f"'/proc/{victim_pid}/environ']:\n"
            "    try:\n        open(path).read(); seen.append('READ')\n"
            "    except OSError as e:\n        seen.append(type(e).__name__)\n"
            f"for target in [{victim_pid}, {os.getpid()}]:\n"
            "    try:\n        os.kill(target, signal.SIGKILL); seen.append('KILLED')\n"
            "    except OSError as e:\n        seen.append(type(e).__name__)\n"
            f"seen.append(libc.syscall(101, 16, {victim_pid}, 0, 0))\n"
            "seen",
        )
        assert "READ" not in out and "KILLED" not in out
        # Refused, or not even visible (the episode's own PID namespace and hidepid).
        assert (
            out.count("PermissionError")
            + out.count("FileNotFoundError")
            + out.count("ProcessLookupError")
            == 5
        )
        assert out.endswith("-1]")
        assert cell(victim, "open('secret.txt').read()") == "'s3cret'"


@needs_root
def test_setsid_double_fork_does_not_survive_the_episode(server, bystander):
    with AnalystEnv(base_url=server).sync() as env:
        env.reset(task_id="tiny-csv")
        out = cell(
            env,
            "import os, time\nr, w = os.pipe()\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    if os.fork() == 0:\n"
            "        os.write(w, str(os.getpid()).encode()); time.sleep(1000)\n"
            "    os._exit(0)\n"
            "int(os.read(r, 32))",
        )
        escapee = host_pid(cell(env, f"print({PID_NAMESPACE_OF_CELL})").strip(), int(out))
        assert not wait_dead(escapee, timeout_s=0.2)
        assert "over" in env.final_answer("0").observation.text
    assert wait_dead(escapee)  # closing the session killed the whole episode
    assert bystander.check() == "7319.25"


def test_gigabyte_print_is_capped(episode):
    started = time.monotonic()
    out = cell(episode, "import os\nfor _ in range(1024):\n    os.write(1, b'x' * 2**20)")
    assert time.monotonic() - started < 30
    assert len(out) < 5_000
    assert "truncated" in out or "TIMEOUT" in out
    assert cell(episode, "'next'") == "'next'"


def test_binary_garbage_on_stdout_is_harmless(episode):
    out = cell(
        episode,
        "import os\nos.write(1, os.urandom(50_000)); os.write(2, b'\\xff\\xfe\\x00'); 'done'",
    )
    assert "done" in out
    assert cell(episode, "'next'") == "'next'"


@pytest.mark.parametrize("crash", ["import os; os._exit(3)", "import ctypes; ctypes.string_at(0)"])
def test_kernel_death_is_reported_and_recovered(episode, crash):
    cell(episode, "keep = 1")
    out = cell(episode, crash)
    assert "restarted" in out
    assert "NameError" in cell(episode, "keep")
    assert "7319.25" in cell(
        episode, "import pandas as pd; float(pd.read_csv('sales.csv').amount.sum())"
    )


def test_huge_rich_outputs_never_reach_the_server_whole(server, episode):
    """100 MB of HTML in one display: the observation (and so the trajectory and live view) stays
    small."""
    result = episode.add_and_execute_code_cell(
        "from IPython.display import display\ndisplay({'text/html': 'y' * 100 * 2**20}, raw=True)"
    )
    assert len(result.observation.model_dump_json()) < 100_000
    state = episode.call_tool("get_notebook_state")
    assert len(str(state)) < 100_000


@pytest.mark.parametrize(
    "reply",
    [
        '{"ok": true}',
        '{"ok": true, "files": "x", "columns": 3, "rows": [1], "engine": "e", "truncated": 0}',
        '{"ok": true, "files": ["x"], "columns": ["a"], "rows": "r", "engine": 1}',
        '{"ok": false, "error": {"nested": 1}}',
    ],
)
def test_a_replaced_kernel_helper_gets_a_tool_error_not_a_server_error(episode, reply):
    """The SQL and file-list helpers live in the kernel, where a cell can rebind them to print
    any JSON: the tool answers "could not", the step is an observation, the episode goes on."""
    cell(
        episode,
        "import builtins\n"
        f"def fake(*args, **kwargs): print({reply!r})\n"
        "for name in ('__analyst_sql__', '__analyst_list_files__'):\n"
        "    setattr(builtins, name, fake); globals()[name] = fake",
    )
    sql = episode.run_sql("select 1").observation
    assert sql.error is None and sql.result["is_error"]
    assert sql.result["data"].startswith("SQL error:")
    files = episode.list_files().observation
    assert files.error is None and files.result["is_error"]
    assert files.result["data"] == "Error: could not list files."
    assert cell(episode, "'next'") == "'next'"


def test_an_oversized_tool_call_is_refused_before_it_runs_or_is_stored(episode, state_dir):
    """40 MB of code in one call (a frame the socket accepts) would be kept in the server's
    memory, echoed back and written three times into the trajectory, 40 times an episode."""
    before = episode.state().step_count
    code = "open('ran.txt', 'w').write('ran')  # " + "a" * (40 * 2**20)
    observation = episode.add_and_execute_code_cell(code).observation
    assert observation.error is not None and observation.error.error_type.value == "invalid_args"
    assert "over the limit" in observation.error.message
    assert "nothing ran" in observation.error.message
    assert episode.state().step_count == before + 1
    assert "No such file" in episode.execute_shell_command("cat ran.txt").observation.text
    assert cell(episode, "'next'") == "'next'"
    trajectory = next((state_dir / "trajectories").glob(f"*{episode.state().episode_id}*.jsonl"))
    assert trajectory.stat().st_size < 1_000_000
