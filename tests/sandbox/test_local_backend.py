"""Behaviour of the local fork-server sandbox, with real processes (Linux only)."""

from __future__ import annotations

import base64
import os
import re
import threading
import time

import pytest
from support import PID_NAMESPACE_OF_CELL, alive, host_pid, wait_dead

from analyst_env.envs.local import LocalSandbox, LocalSandboxBackend
from analyst_env.envs.sandbox import Sandbox, SandboxBackend, SandboxClosedError

ANSI = re.compile(r"\x1b\[")


def test_implements_the_interface(backend: LocalSandboxBackend, sandbox: LocalSandbox) -> None:
    assert isinstance(sandbox, Sandbox)
    assert backend.name == "local"
    _: SandboxBackend = backend
    assert os.path.isabs(sandbox.workdir)
    # The agent's directory starts empty but for the task's files: no folder it did not make
    # (the verify directory is made only when verification runs).
    assert sandbox.run_shell("ls -A", timeout_s=10).stdout == ""


def test_task_files_are_copied(backend: LocalSandboxBackend, tmp_path) -> None:
    source = tmp_path / "data.csv"
    source.write_text("a,b\n1,2\n")
    sandbox = backend.start("default", files={"data.csv": str(source), "sub/x.csv": str(source)})
    try:
        result = sandbox.run_cell(
            "import pandas as pd; int(pd.read_csv('sub/x.csv').a.sum())", timeout_s=10
        )
        assert result.outputs[0]["text/plain"] == "1"
        sandbox.put_file("data.csv", b"changed")
        assert source.read_text() == "a,b\n1,2\n"  # the episode has its own copy
    finally:
        sandbox.close()


def test_state_persists_across_cells(sandbox: LocalSandbox) -> None:
    assert sandbox.run_cell("x = 41", timeout_s=10).success
    result = sandbox.run_cell("x + 1", timeout_s=10)
    assert result.outputs == [{"text/plain": "42"}]
    assert result.execution_count == 2


def test_sandboxes_are_isolated(backend: LocalSandboxBackend) -> None:
    first = backend.start("default", files={})
    second = backend.start("default", files={})
    try:
        first.run_cell("secret = 1\nopen('mine.txt', 'w').write('x')", timeout_s=10)
        result = second.run_cell("secret", timeout_s=10)
        assert result.error is not None and result.error.name == "NameError"
        assert first.workdir != second.workdir
        with pytest.raises(FileNotFoundError):
            second.get_file("mine.txt")
        assert first.get_file("mine.txt") == b"x"
    finally:
        first.close()
        second.close()


def test_a_kernels_first_error_imports_nothing(sandbox: LocalSandbox) -> None:
    # The traceback machinery (stack_data, executing, pygments) was imported on each kernel's
    # first error: ~80 ms of CPU per new episode, which a burst of 32 paid at once.
    sandbox.run_cell("import sys\nbefore = set(sys.modules)", timeout_s=10)
    # The parent's own warm-up error is not left for the kernel to find.
    leftover = sandbox.run_cell("hasattr(sys, 'last_value')", timeout_s=10)
    assert leftover.outputs == [{"text/plain": "False"}]
    failed = sandbox.run_cell("name_that_is_not_defined", timeout_s=10)
    assert failed.error is not None and failed.error.name == "NameError"
    assert "name_that_is_not_defined" in failed.error.traceback
    result = sandbox.run_cell("sorted(set(sys.modules) - before)", timeout_s=10)
    assert result.outputs == [{"text/plain": "[]"}]


def test_dataframe_value_has_text_and_html(sandbox: LocalSandbox) -> None:
    result = sandbox.run_cell("import pandas as pd\npd.DataFrame({'a': [1, 2]})", timeout_s=10)
    assert result.success
    [bundle] = result.outputs
    assert "a" in bundle["text/plain"]
    assert "<table" in bundle["text/html"]


def test_values_are_formatted_only_into_the_shown_types(sandbox: LocalSandbox) -> None:
    # Formatting into types nobody reads was a third of a trivial cell; a raw bundle
    # passed to display() still keeps whatever the cell put in it.
    code = (
        "class Both:\n"
        "    def _repr_html_(self): return '<b>x</b>'\n"
        "    def _repr_latex_(self): return '$x$'\n"
        "    def _repr_json_(self): return {'x': 1}\n"
        "display({'text/latex': '$y$'}, raw=True)\n"
        "Both()"
    )
    result = sandbox.run_cell(code, timeout_s=10)
    assert result.success
    raw, value = result.outputs
    assert raw == {"text/latex": "$y$"}
    assert set(value) == {"text/plain", "text/html"} and value["text/html"] == "<b>x</b>"


def test_display_outputs_in_order(sandbox: LocalSandbox) -> None:
    result = sandbox.run_cell("display('first'); display({'k': 1}); 'last'", timeout_s=10)
    assert [o["text/plain"] for o in result.outputs] == ["'first'", "{'k': 1}", "'last'"]


def test_matplotlib_figure_becomes_png(sandbox: LocalSandbox) -> None:
    result = sandbox.run_cell(
        "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()", timeout_s=20
    )
    assert result.success, result
    assert result.stderr == ""
    pngs = [o["image/png"] for o in result.outputs if "image/png" in o]
    assert len(pngs) == 1
    assert base64.b64decode(pngs[0]).startswith(b"\x89PNG\r\n\x1a\n")
    # A figure left open is shown after the cell.
    result = sandbox.run_cell("plt.figure(); plt.bar([1], [2]);", timeout_s=20)
    assert [list(o) for o in result.outputs] == [["image/png"]]


def test_a_saved_svg_keeps_its_text_as_text(sandbox: LocalSandbox) -> None:
    """Kernels start with svg.fonttype 'none' (image_specs.apply_mpl_rc): a chart task's figure
    can be read back from its tick labels without the agent having to know the setting."""
    result = sandbox.run_cell(
        "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.bar(['North'], [3])\n"
        "fig.savefig('chart.svg')\nplt.close(fig)",
        timeout_s=20,
    )
    assert result.success, result
    assert b">North</text>" in sandbox.get_file("chart.svg")


def test_stdout_and_stderr_are_captured(sandbox: LocalSandbox) -> None:
    result = sandbox.run_cell(
        "import sys, os\nprint('out')\nprint('err', file=sys.stderr)\nos.system('echo c-level')",
        timeout_s=10,
    )
    assert result.stdout == "out\nc-level\n"
    assert result.stderr == "err\n"


def test_exception_is_data_and_kernel_survives(sandbox: LocalSandbox) -> None:
    sandbox.run_cell("y = 5", timeout_s=10)
    result = sandbox.run_cell("def f():\n    return {}['missing']\nf()", timeout_s=10)
    assert result.error is not None
    assert result.error.name == "KeyError"
    assert result.error.value == "'missing'"
    assert "f()" in result.error.traceback
    assert not ANSI.search(result.error.traceback)
    syntax = sandbox.run_cell("def (", timeout_s=10)
    assert syntax.error is not None and syntax.error.name == "SyntaxError"
    assert sandbox.run_cell("y", timeout_s=10).outputs == [{"text/plain": "5"}]


def test_exit_does_not_end_the_kernel(sandbox: LocalSandbox) -> None:
    assert sandbox.run_cell("w = 1\nexit()", timeout_s=10).success
    assert sandbox.run_cell("w", timeout_s=10).outputs == [{"text/plain": "1"}]


def test_busy_loop_is_interrupted(sandbox: LocalSandbox) -> None:
    sandbox.run_cell("kept = 'yes'", timeout_s=10)
    started = time.monotonic()
    result = sandbox.run_cell("while True: pass", timeout_s=1)
    assert time.monotonic() - started < 15, (
        "the cell did not hang (a bound for hangs, not a timing test)"
    )
    assert (
        result.timed_out and not result.kernel_restarted
    )  # the interrupt worked within its grace period
    assert result.error is not None and "1 s" in result.error.value
    assert "KeyboardInterrupt" in result.error.traceback
    assert sandbox.run_cell("kept", timeout_s=10).outputs == [{"text/plain": "'yes'"}]


def test_ignored_interrupt_replaces_the_kernel(sandbox: LocalSandbox) -> None:
    sandbox.put_file("keep.txt", b"kept")
    old_pid = sandbox.kernel_pid
    result = sandbox.run_cell(
        "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass",
        timeout_s=0.5,
    )
    assert result.timed_out and result.kernel_restarted
    assert sandbox.kernel_pid != old_pid
    assert wait_dead(old_pid)
    assert sandbox.run_cell("open('keep.txt').read()", timeout_s=10).outputs == [
        {"text/plain": "'kept'"}
    ]


def test_kernel_exit_is_reported_and_replaced(sandbox: LocalSandbox) -> None:
    started = sandbox.run_cell(
        "import subprocess\nz = subprocess.Popen(['sleep', '1000'], start_new_session=True)\nz.pid",
        timeout_s=10,
    )
    orphan = host_pid(
        value_of(sandbox, PID_NAMESPACE_OF_CELL), int(started.outputs[0]["text/plain"])
    )
    result = sandbox.run_cell("import os\nos._exit(1)", timeout_s=10)
    assert result.kernel_restarted and not result.timed_out
    assert result.error is not None and result.error.name == "KernelDied"
    assert wait_dead(orphan)  # the dead kernel's background process is cleaned up
    after = sandbox.run_cell("z", timeout_s=10)
    assert after.error is not None and after.error.name == "NameError"
    assert sandbox.run_cell("2 * 3", timeout_s=10).outputs == [{"text/plain": "6"}]


def test_memory_limit_gives_memory_error(sandbox: LocalSandbox) -> None:
    result = sandbox.run_cell("big = bytearray(8 * 1024**3)", timeout_s=20)
    assert result.error is not None and result.error.name == "MemoryError"
    assert not result.kernel_restarted
    assert sandbox.run_cell("1 + 1", timeout_s=10).outputs == [{"text/plain": "2"}]


def test_huge_output_is_capped(sandbox: LocalSandbox) -> None:
    result = sandbox.run_cell("for _ in range(300_000): print('x' * 99)", timeout_s=30)
    assert result.success
    assert len(result.stdout) < 2 * 1024 * 1024 + 200
    assert result.stdout.startswith("x" * 99 + "\n")
    assert "output truncated" in result.stdout


def test_shell_output_and_exit_code(sandbox: LocalSandbox) -> None:
    result = sandbox.run_shell("echo hello; echo oops >&2; pwd; exit 3", timeout_s=10)
    assert result.stdout == f"hello\n{sandbox.workdir}\n"
    assert result.stderr == "oops\n"
    assert result.exit_code == 3 and not result.timed_out


def test_shell_timeout_kills_the_tree(sandbox: LocalSandbox) -> None:
    started = time.monotonic()
    result = sandbox.run_shell("sleep 100 & echo $! > sleep.pid; wait", timeout_s=1)
    assert time.monotonic() - started < 5
    assert result.timed_out and result.exit_code is None
    pid = int(sandbox.get_file("sleep.pid"))
    # Looked up in the sandbox's own PID namespace: gone, and reaped rather than a zombie.
    assert value_of(sandbox, f"__import__('os').path.exists('/proc/{pid}')") == "False"


def test_close_kills_background_processes(backend: LocalSandboxBackend) -> None:
    sandbox = backend.start("default", files={})
    result = sandbox.run_cell(
        "import subprocess\n"
        "p = subprocess.Popen(['sleep', '1000'], start_new_session=True)\n"
        "q = subprocess.Popen(['sh', '-c', '(sleep 1000 &) ; echo started'])\n"
        "p.pid",
        timeout_s=10,
    )
    pid = host_pid(value_of(sandbox, PID_NAMESPACE_OF_CELL), int(result.outputs[0]["text/plain"]))
    kernel_pid = sandbox.kernel_pid
    assert alive(pid)
    sandbox.close()
    assert wait_dead(pid)
    assert wait_dead(kernel_pid)
    sandbox.close()  # idempotent
    with pytest.raises(SandboxClosedError):
        sandbox.run_cell("1", timeout_s=1)


def test_close_from_another_thread_ends_a_running_cell(backend: LocalSandboxBackend) -> None:
    sandbox = backend.start("default", files={})
    threading.Timer(0.5, sandbox.close).start()
    with pytest.raises(SandboxClosedError):
        sandbox.run_cell("import time\ntime.sleep(30)", timeout_s=30)


def test_interrupt_from_another_thread(sandbox: LocalSandbox) -> None:
    threading.Timer(0.5, sandbox.interrupt).start()
    result = sandbox.run_cell("import time\ntime.sleep(30)", timeout_s=30)
    assert result.error is not None and result.error.name == "KeyboardInterrupt"
    assert not result.timed_out


def test_seeding(backend: LocalSandboxBackend) -> None:
    code = "import random, numpy as np\n(np.random.rand(), random.random())"

    def draw(seed: int | None) -> str:
        sandbox = backend.start("default", files={}, seed=seed)
        try:
            return sandbox.run_cell(code, timeout_s=10).outputs[0]["text/plain"]
        finally:
            sandbox.close()

    assert draw(7) == draw(7)
    assert draw(7) != draw(8)
    assert draw(None) != draw(None)


def test_env_is_applied(backend: LocalSandboxBackend) -> None:
    sandbox = backend.start("default", files={}, env={"TASK_NAME": "demo"})
    try:
        assert sandbox.run_cell("import os; os.environ['TASK_NAME']", timeout_s=10).outputs == [
            {"text/plain": "'demo'"}
        ]
        assert sandbox.run_shell("echo $TASK_NAME", timeout_s=10).stdout == "demo\n"
    finally:
        sandbox.close()


def test_put_and_get_files(sandbox: LocalSandbox) -> None:
    sandbox.put_file("dir/a.bin", b"\x00\x01")
    assert sandbox.get_file("dir/a.bin") == b"\x00\x01"
    assert sandbox.get_file(os.path.join(sandbox.workdir, "dir/a.bin")) == b"\x00\x01"
    with pytest.raises(FileNotFoundError):
        sandbox.get_file("nope.txt")
    for bad in ("../escape.txt", "/etc/passwd", "dir/../../x"):
        with pytest.raises(ValueError, match="outside the working directory"):
            sandbox.get_file(bad)
        with pytest.raises(ValueError, match="outside the working directory"):
            sandbox.put_file(bad, b"x")


def test_silent_cells_do_not_count(sandbox: LocalSandbox) -> None:
    assert sandbox.run_cell("a = 1", timeout_s=10).execution_count == 1
    silent = sandbox.run_cell("b = a + 1\nb", timeout_s=10, silent=True)
    assert silent.execution_count is None and silent.outputs == []
    assert sandbox.run_cell("b", timeout_s=10).execution_count == 2


def test_concurrent_starts(backend: LocalSandboxBackend) -> None:
    results: dict[int, str] = {}
    errors: list[BaseException] = []

    def episode(i: int) -> None:
        try:
            sandbox = backend.start("default", files={})
            try:
                results[i] = sandbox.run_cell(f"{i} * 10", timeout_s=20).outputs[0]["text/plain"]
            finally:
                sandbox.close()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=episode, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert results == {i: str(i * 10) for i in range(8)}


def test_dead_zygote_is_restarted() -> None:
    backend = LocalSandboxBackend()
    try:
        first = backend.start("default", files={})
        kernel_pid = first.kernel_pid
        zygote_pid = backend._zygotes.pid("default")
        os.kill(zygote_pid, 9)
        # Its kernels die with it; the next call forks from a new zygote.
        assert wait_dead(zygote_pid) and wait_dead(kernel_pid)
        result = first.run_cell("1 + 1", timeout_s=10)
        assert result.kernel_restarted
        second = backend.start("default", files={})
        assert second.run_cell("3", timeout_s=10).outputs == [{"text/plain": "3"}]
        assert first.run_cell("4", timeout_s=10).outputs == [{"text/plain": "4"}]
        second.close()
        first.close()
    finally:
        backend.close()


def value_of(sandbox: LocalSandbox, code: str) -> str:
    """The ``text/plain`` value of a cell (its repr, quotes stripped from a string)."""
    result = sandbox.run_cell(code, timeout_s=20)
    assert result.error is None, result.error
    return result.outputs[0]["text/plain"].strip("'")


def test_rich_outputs_are_capped_per_cell(sandbox: LocalSandbox) -> None:
    """100 MB of HTML, a huge image and 10,000 displays: each cut or dropped with a note."""
    result = sandbox.run_cell(
        "from IPython.display import display\n"
        "display({'text/html': 'y' * 100 * 2**20}, raw=True)\n"
        "display({'image/png': 'A' * 3 * 2**20}, raw=True)\n"
        "for i in range(10_000): display(i)",
        timeout_s=60,
    )
    assert result.success
    total = sum(len(v) for bundle in result.outputs for v in bundle.values())
    assert total < 2 * 2**20 + 100_000
    assert result.outputs[0]["text/html"].startswith("y" * 1000)
    assert "output truncated" in result.outputs[0]["text/html"]
    assert "image/png" not in result.outputs[1] and "dropped" in result.outputs[1]["text/plain"]
    assert (
        len(result.outputs) <= 201 and "more displays dropped" in result.outputs[-1]["text/plain"]
    )
    huge_error = sandbox.run_cell("raise ValueError('z' * 50 * 2**20)", timeout_s=60)
    assert huge_error.error is not None and len(huge_error.error.value) < 2 * 2**20 + 100
    assert sandbox.run_cell("1 + 1", timeout_s=10).outputs == [{"text/plain": "2"}]
