"""The slot runner and its client, over a real process's stdin/stdout (no container).

This is the protocol every Docker container and Modal sandbox speaks; here the
runner is a local process, so each behaviour is checked end to end: episodes
forked per start, interrupts, kernels that die or hang, late replies, and a
runner that disappears mid-cell.
"""

from __future__ import annotations

import base64
import os
import signal
import sys
import threading
import time

import pytest

from analyst_env.envs.frames import Decoder, encode
from analyst_env.envs.remote.channel import process_channel
from analyst_env.envs.remote.runner_link import RemoteSandbox, RunnerClient
from analyst_env.envs.sandbox import SandboxClosedError, SandboxError


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("slot")
    channel, proc = process_channel(
        [sys.executable, "-m", "analyst_env.envs.remote.runner", "--workdir", str(workdir)]
    )
    client = RunnerClient(channel, "test runner")
    ready = client.wait_ready(120)
    yield client, proc, ready
    client.close()
    proc.wait(timeout=10)


def start(client, files=None, seed=None, env=None, closed=None):
    payload = {k: base64.b64encode(v).decode() for k, v in (files or {}).items()}
    reply = client.call({"op": "start", "files": payload, "seed": seed, "env": env or {}}, 60)
    assert reply is not None and "failure" not in reply, reply
    return RemoteSandbox(
        client, reply["workdir"], on_close=(closed or (lambda healthy: None)), interrupt_grace_s=2
    )


def test_wire_decoder_handles_split_and_joined_frames():
    frames = encode({"a": 1}) + encode({"b": "x" * 1000}) + encode({"c": [1, 2]})
    decoder = Decoder()
    out = []
    for i in range(0, len(frames), 7):
        out += decoder.feed(frames[i : i + 7])
    assert out == [{"a": 1}, {"b": "x" * 1000}, {"c": [1, 2]}]
    with pytest.raises(ValueError, match="exceeds"):
        Decoder().feed(b"\xff\xff\xff\xff")


def test_ready_message_describes_the_runner(runner):
    _, proc, ready = runner
    assert ready["op"] == "ready" and ready["protocol"] == 1 and ready["missing"] == []
    assert ready["pid"] > 0


def test_episode_cells_files_env_and_seed(runner):
    client, _, _ = runner
    sandbox = start(
        client, {"data/sales.csv": b"region,amount\nwest,3\neast,4\n"}, seed=11, env={"TASK": "t1"}
    )
    result = sandbox.run_cell(
        "import os, numpy as np, pandas as pd\n"
        "df = pd.read_csv('data/sales.csv')\n"
        "print(os.environ['TASK'], round(float(np.random.rand()), 6))\n"
        "int(df.amount.sum())",
        timeout_s=30,
    )
    assert result.error is None, result.error
    import numpy as np

    np.random.seed(11)
    assert result.stdout == f"t1 {round(float(np.random.rand()), 6)}\n"
    assert result.outputs == [{"text/plain": "7"}]
    assert result.execution_count == 1
    assert sandbox.helpers_defined
    listed = sandbox.run_cell("__analyst_list_files__()", timeout_s=10, silent=True)
    assert '"name": "data/sales.csv"' in listed.stdout and listed.execution_count is None
    shell = sandbox.run_shell("cat data/sales.csv | wc -l; echo oops >&2; exit 3", timeout_s=10)
    assert (shell.stdout.strip(), shell.stderr, shell.exit_code) == ("3", "oops\n", 3)
    sandbox.put_file("out/a.bin", b"\x00\x01")
    assert sandbox.get_file("out/a.bin") == b"\x00\x01"
    with pytest.raises(FileNotFoundError):
        sandbox.get_file("missing.txt")
    with pytest.raises(ValueError, match="outside the working directory"):
        sandbox.get_file("../../etc/passwd")
    sandbox.close()


def test_next_episode_starts_clean(runner):
    client, _, _ = runner
    first = start(client, {"a.txt": b"1"})
    first.run_cell("secret = 42", timeout_s=10)
    first.run_shell("echo leftover > junk.txt", timeout_s=10)
    first.close()
    second = start(client, {"b.txt": b"2"})
    assert second.run_cell("'secret' in dir()", timeout_s=10).outputs == [{"text/plain": "False"}]
    assert sorted(second.run_shell("ls -A", timeout_s=10).stdout.split()) == ["b.txt"]
    second.close()
    with pytest.raises(SandboxClosedError):
        second.run_cell("1", timeout_s=5)


def test_hung_cell_is_interrupted_and_stubborn_one_restarts_the_kernel(runner):
    client, _, _ = runner
    sandbox = start(client, {"keep.txt": b"k"})
    sandbox.run_cell("x = 1", timeout_s=10)
    interrupted = sandbox.run_cell("import time\nwhile True: time.sleep(0.05)", timeout_s=1)
    assert interrupted.timed_out and not interrupted.kernel_restarted
    assert "KeyboardInterrupt" in interrupted.error.traceback
    assert sandbox.run_cell("x", timeout_s=5).outputs == [{"text/plain": "1"}]
    stubborn = sandbox.run_cell(
        "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: "
        "time.sleep(0.05)",
        timeout_s=1,
    )
    assert stubborn.timed_out and stubborn.kernel_restarted
    after = sandbox.run_cell("print(open('keep.txt').read()); 'x' in dir()", timeout_s=10)
    assert after.stdout == "k\n" and after.outputs == [{"text/plain": "False"}]
    # The interrupted cell's late reply never answers a later request.
    assert sandbox.run_cell("2 + 2", timeout_s=5).outputs == [{"text/plain": "4"}]
    sandbox.close()


def test_kernel_that_dies_is_replaced(runner):
    client, _, _ = runner
    sandbox = start(client, {"keep.txt": b"k"})
    died = sandbox.run_cell("import os; os._exit(7)", timeout_s=10)
    assert died.kernel_restarted and died.error.name == "KernelDied"
    assert sandbox.run_cell("open('keep.txt').read()", timeout_s=10).outputs == [
        {"text/plain": "'k'"}
    ]
    sandbox.close()


def test_interrupt_from_another_thread(runner):
    client, _, _ = runner
    sandbox = start(client)
    threading.Timer(0.5, sandbox.interrupt).start()
    started = time.monotonic()
    result = sandbox.run_cell("import time\ntime.sleep(20)", timeout_s=30)
    assert time.monotonic() - started < 10
    assert result.error.name == "KeyboardInterrupt" and not result.timed_out
    sandbox.close()


def test_bad_task_file_name_is_refused(runner):
    client, _, _ = runner
    reply = client.call({"op": "start", "files": {"../x": ""}, "seed": None, "env": {}}, 30)
    assert "must be a relative path" in reply["failure"]["message"]
    reply = client.call({"op": "cell", "code": "1", "silent": False}, 10)
    assert reply["failure"]["message"] == "no episode is active in this slot"


def test_runner_that_dies_mid_cell_is_a_clear_sandbox_error(tmp_path):
    channel, proc = process_channel(
        [sys.executable, "-m", "analyst_env.envs.remote.runner", "--workdir", str(tmp_path)]
    )
    client = RunnerClient(channel, "doomed runner")
    client.wait_ready(120)
    closed = []
    sandbox = start(client, closed=closed.append)
    threading.Timer(1.0, lambda: os.kill(proc.pid, signal.SIGKILL)).start()
    with pytest.raises(SandboxError, match="doomed runner is gone.*reset to start a new episode"):
        sandbox.run_cell("import time\ntime.sleep(30)", timeout_s=60)
    sandbox.close()
    assert closed == [False], "a slot whose runner died must not be reused"
    proc.wait(timeout=10)


def test_runner_that_cannot_start_says_why(tmp_path):
    channel, proc = process_channel(
        [
            sys.executable,
            "-m",
            "analyst_env.envs.remote.runner",
            "--workdir",
            str(tmp_path),
            "--preload",
            "no_such_mod",
        ]
    )
    client = RunnerClient(channel, "runner")
    ready = client.wait_ready(120)
    assert ready["missing"] == ["no_such_mod"]
    client.close()
    proc.wait(timeout=10)
    channel, proc = process_channel(
        [sys.executable, "-c", "import sys; sys.stderr.write('boom: no python here'); sys.exit(3)"]
    )
    with pytest.raises(SandboxError, match="boom: no python here"):
        RunnerClient(channel, "broken").wait_ready(30)


def test_a_dead_standby_is_replaced_at_start(runner):
    from analyst_env.envs.kernel import procctl

    client, _, ready = runner
    start(client).close()  # the runner tears the episode down, then forks the next standby

    def children() -> list[int]:
        return sorted(pid for pid, ppid in procctl.parent_map().items() if ppid == ready["pid"])

    deadline = time.monotonic() + 30
    seen: list[int] = []
    while time.monotonic() < deadline:
        now = children()
        if len(now) == 1 and now == seen:  # the old kernel is gone; one standby stays
            break
        seen = now
        time.sleep(0.5)
    assert len(seen) == 1, f"one standby kernel waits per slot, found {seen}"
    os.kill(seen[0], signal.SIGKILL)
    sandbox = start(client, {"a.txt": b"x"})
    assert sandbox.run_cell("open('a.txt').read()", timeout_s=20).outputs == [{"text/plain": "'x'"}]
    sandbox.close()
