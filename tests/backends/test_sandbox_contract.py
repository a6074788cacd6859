"""The ``Sandbox`` contract, written once and checked on every backend.

In the spirit of Gymnasium's ``check_env``: each backend (the local fork
server, the slot runner behind the Modal backend on the fake Modal SDK, and
E2B through its real SDK against the fake sandbox services) must give the
same results for the same calls, with the exact texts the model reads. Where
a vendor cannot do something (E2B has no interrupt), the case declares it
(``backend_cases.py``, the table of backends) and the test checks the documented
fallback instead.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from backend_cases import CASES, Case

from analyst_env.envs.capabilities import (
    BackendCapabilities,
    BakesArtifacts,
    KeepsStandbys,
    ReportsProtections,
    ServesBakedPackages,
    StartsWithoutWaiting,
    WarmsUp,
    protections_of,
    reports_confinement,
)
from analyst_env.envs.sandbox import (
    Sandbox,
    SandboxBackend,
    SandboxBaker,
    SandboxClosedError,
    SandboxError,
)

TIMED_OUT = "The cell exceeded its 1 s time limit and was interrupted"
RESTARTED = (
    "; it did not stop, so the kernel was restarted: variables are lost, "
    "files in the working directory are kept"
)
KERNEL_DIED = (
    "The kernel process died (a crash, os._exit or the out-of-memory killer) and was "
    "restarted: variables are lost, files in the working directory are kept"
)


@pytest.fixture(params=sorted(CASES))
def case(request: pytest.FixtureRequest) -> Iterator[Case]:
    case = CASES[request.param](request)
    yield case
    case.backend.close()


@pytest.fixture
def sandbox(case: Case, csv_file: str) -> Iterator[Sandbox]:
    sandbox = case.backend.start("default", files={"data/sales.csv": csv_file}, seed=5)
    yield sandbox
    sandbox.close()


def test_optional_parts_are_declared(case):
    backend = case.backend
    assert isinstance(backend, SandboxBackend)
    capabilities = backend.capabilities
    assert isinstance(capabilities, BackendCapabilities)
    assert capabilities.interrupt == case.interrupts
    assert capabilities.kernel == "persistent" and capabilities.file_transfer
    assert isinstance(backend, BakesArtifacts) == case.bakes_own_artifacts
    if isinstance(backend, BakesArtifacts):
        assert isinstance(backend.baker(), SandboxBaker)
    for part in (StartsWithoutWaiting, KeepsStandbys, ServesBakedPackages, ReportsProtections):
        assert isinstance(backend, part) == case.local_parts, part.__name__
    assert isinstance(backend, WarmsUp) == case.warms_up
    report = protections_of(backend)
    # A backend that reports nothing claims nothing: no isolation, never taken as confining.
    assert bool(report.get("isolation")) == case.local_parts == reports_confinement(backend)
    if isinstance(backend, ServesBakedPackages):
        backend.forget_image("env-0000")  # an image it never served: nothing happens
        backend.use_image_resolver(lambda image: None)
    if isinstance(backend, KeepsStandbys):
        assert backend.standby_count() >= 0 and backend.kernels_on_order() >= 0


def test_is_a_sandbox_with_state_counts_and_data_errors(sandbox):
    assert isinstance(sandbox, Sandbox)
    first = sandbox.run_cell("x = 40\nprint('hi')\nx + 2", timeout_s=30)
    assert (first.stdout, first.outputs, first.execution_count) == (
        "hi\n",
        [{"text/plain": "42"}],
        1,
    )
    assert first.success
    failed = sandbox.run_cell("{}['missing']", timeout_s=30)
    assert (failed.error.name, failed.error.value, failed.execution_count) == (
        "KeyError",
        "'missing'",
        2,
    )
    assert not failed.success and not failed.timed_out and not failed.kernel_restarted
    assert sandbox.run_cell("x", timeout_s=30).outputs == [{"text/plain": "40"}]


def test_files_and_shell_share_the_working_directory(sandbox):
    assert sandbox.get_file("data/sales.csv").startswith(b"region,amount")
    sandbox.put_file("out/r.txt", b"written")
    assert sandbox.get_file("out/r.txt") == b"written"
    shell = sandbox.run_shell("cat out/r.txt; echo err >&2; exit 3", timeout_s=20)
    assert (shell.stdout, shell.stderr, shell.exit_code, shell.timed_out) == (
        "written",
        "err\n",
        3,
        False,
    )
    with pytest.raises(FileNotFoundError):
        sandbox.get_file("nope.txt")
    with pytest.raises(ValueError):
        sandbox.put_file("../../escape.txt", b"")
    timed = sandbox.run_shell("sleep 20", timeout_s=1)
    assert timed.timed_out and timed.exit_code is None


def test_a_cell_over_its_limit_is_stopped_with_the_documented_text(case, sandbox):
    sandbox.run_cell("kept = 1", timeout_s=30)
    started = time.monotonic()
    result = sandbox.run_cell("import time\nwhile True: time.sleep(0.05)", timeout_s=1)
    assert time.monotonic() - started < 30
    assert result.timed_out and result.error.name == "TimeoutError"
    if case.interrupts:
        assert result.error.value == TIMED_OUT and not result.kernel_restarted
        assert "KeyboardInterrupt" in result.error.traceback
        assert sandbox.run_cell("kept", timeout_s=30).outputs == [{"text/plain": "1"}]
    else:
        assert result.error.value == TIMED_OUT + RESTARTED and result.kernel_restarted
    assert sandbox.get_file("data/sales.csv").startswith(b"region"), "files survive"


def test_a_cell_that_ignores_the_interrupt_gets_a_fresh_kernel(case, sandbox):
    if not case.interrupts:
        pytest.skip("this backend restarts at the limit without interrupting")
    code = (
        "import signal, time\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "while True: time.sleep(0.05)"
    )
    result = sandbox.run_cell(code, timeout_s=1)
    assert result.timed_out and result.kernel_restarted
    assert result.error.value == TIMED_OUT + RESTARTED
    after = sandbox.run_cell("'signal' in dir()", timeout_s=30)
    assert after.outputs == [{"text/plain": "False"}] and after.execution_count == 1


def test_a_kernel_that_dies_is_replaced_and_said_so(case, sandbox):
    if not case.reports_kernel_death:
        pytest.skip("this vendor's kernel does not report its own death")
    sandbox.run_cell("gone = 1", timeout_s=30)
    died = sandbox.run_cell("import os\nos._exit(3)", timeout_s=30)
    assert died.kernel_restarted
    assert (died.error.name, died.error.value) == ("KernelDied", KERNEL_DIED)
    after = sandbox.run_cell("'gone' in dir()", timeout_s=30)
    assert after.outputs == [{"text/plain": "False"}]
    assert sandbox.get_file("data/sales.csv").startswith(b"region"), "files survive"


def test_interrupt_from_another_thread_stops_the_cell(case, sandbox):
    if not case.interrupts:
        pytest.skip("this backend cannot interrupt a cell")
    timer = threading.Timer(1.0, sandbox.interrupt)
    timer.start()
    result = sandbox.run_cell("import time\ntime.sleep(30)", timeout_s=60)
    timer.join()
    assert result.error.name == "KeyboardInterrupt" and not result.kernel_restarted


def test_close_is_idempotent_and_ends_every_verb(sandbox):
    sandbox.close()
    sandbox.close()
    sandbox.interrupt()
    for call in (
        lambda: sandbox.run_cell("1", timeout_s=5),
        lambda: sandbox.run_shell("true", timeout_s=5),
        lambda: sandbox.put_file("a.txt", b""),
        lambda: sandbox.get_file("a.txt"),
    ):
        with pytest.raises(SandboxClosedError):
            call()


def test_task_files_outside_the_working_directory_are_refused(case, csv_file):
    for name in ("../up.csv", "/abs.csv", ""):
        with pytest.raises(SandboxError) as caught:
            case.backend.start("default", files={name: csv_file})
        assert str(caught.value) == (
            f"task file name {name!r} must be a relative path inside the working directory"
        )
