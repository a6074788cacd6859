"""More than one zygote per image: kernels forked at once, each zygote confined alike.

Real zygotes, real kernels. An image's first zygote boots on first use; a burst of
resets boots more (``Zygotes.grow``), up to ``zygotes_per_image``.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from support import wait_dead

from analyst_env.envs.local import LocalSandbox, LocalSandboxBackend
from analyst_env.envs.local.isolation import Sizing
from analyst_env.envs.local.zygote_client import ZygoteDied, ZygoteProcess
from analyst_env.envs.sandbox import SandboxError

# What a kernel can see of its own confinement; the same wherever it was forked.
_FACTS = """
import os
lines = open('/proc/self/status').read().splitlines()
status = dict(line.split(':\\t', 1) for line in lines if ':\\t' in line)
(os.getuid() != 0, status['Seccomp'].strip(), status['NoNewPrivs'].strip(),
 os.path.exists(PACKAGE + '/__init__.py'), os.access('/slots', os.R_OK), os.path.exists(SLOT_DIR))
"""


def wait_until(predicate, timeout_s: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


@pytest.fixture
def two() -> Iterator[LocalSandboxBackend]:
    """A backend with no standbys whose image has two zygotes running."""
    backend = LocalSandboxBackend(standbys=0, sizing=Sizing(disk_mb=2), zygotes_per_image=2)
    try:
        backend.warm_up()
        assert backend._zygotes.grow("default")
        assert wait_until(lambda: len(backend._zygotes.live("default")) == 2)
        yield backend
    finally:
        backend.close()


def zygote_of(sandbox: LocalSandbox):
    placement = sandbox._socket_link.order.wait(60)
    return placement.slot.zygote


def facts(sandbox: LocalSandbox) -> str:
    import analyst_env

    package = os.path.dirname(os.path.abspath(analyst_env.__file__))
    slot = sandbox._socket_link.order.wait(60).slot.name
    other = "/slots/" + ("u0" if slot != "u0" else "u1")
    code = f"PACKAGE = {package!r}\nSLOT_DIR = {other!r}\n{_FACTS}"
    result = sandbox.run_cell(code, timeout_s=30)
    assert result.success, (slot, result)
    return result.outputs[0]["text/plain"]


def test_grow_stops_at_the_limit_and_needs_a_first_zygote() -> None:
    backend = LocalSandboxBackend(standbys=0, zygotes_per_image=1)
    try:
        assert not backend._zygotes.grow("default"), "no zygote yet: the first boots on use"
        backend.warm_up()
        assert not backend._zygotes.grow("default"), "one per image at most"
        assert len(backend._zygotes.pids("default")) == 1
    finally:
        backend.close()


def test_two_zygotes_fork_at_once_and_confine_alike(two) -> None:
    zygotes = two._zygotes
    first, second = zygotes.live("default")
    held = zygotes._acquire("default", None)  # lent out: busy with a long request
    try:
        sandbox = two.start("default", files={})
        try:
            other = zygote_of(sandbox)
            assert other is not held, "a free zygote forks while the other is busy"
            assert sandbox.run_cell("1 + 1", timeout_s=30).outputs == [{"text/plain": "2"}]
        finally:
            sandbox.close()
    finally:
        zygotes._release(held)
    # One kernel from each zygote: the same confinement, as far as a kernel can tell.
    seen = {}
    for zygote in (first, second):
        lent = zygotes._acquire("default", first if zygote is second else second)
        try:
            sandbox = two.start("default", files={})
            assert zygote_of(sandbox) is zygote
            seen[zygote.host_pid] = (sandbox, facts(sandbox))
        finally:
            zygotes._release(lent)
    try:
        (a, facts_a), (b, facts_b) = seen.values()
        assert facts_a == facts_b, (facts_a, facts_b)
        if two.mode != "none":
            assert ", False, False, False)" in facts_a, facts_a  # package, slots hidden
        if two.protections().get("seccomp") is True:
            assert "'2', '1'" in facts_a, facts_a  # seccomp filter and no_new_privs
    finally:
        for sandbox, _ in seen.values():
            sandbox.close()


def test_one_zygote_dying_leaves_the_other_serving(two) -> None:
    zygotes = two._zygotes
    first, second = zygotes.live("default")
    lent = zygotes._acquire("default", first)
    try:
        victim = two.start("default", files={})
        assert zygote_of(victim) is second
    finally:
        zygotes._release(lent)
    kernel_pid = victim.kernel_pid
    os.kill(second.host_pid, 9)
    assert wait_dead(second.host_pid) and wait_dead(kernel_pid)
    try:
        # Its episode gets a new kernel from the zygote still running.
        result = victim.run_cell("1 + 1", timeout_s=30)
        assert result.kernel_restarted
        assert victim.run_cell("3", timeout_s=30).outputs == [{"text/plain": "3"}]
        assert zygote_of(victim) is first
        assert zygotes.live("default") == [first]
        others = [two.start("default", files={}) for _ in range(4)]
        try:
            assert all(zygote_of(s) is first for s in others)
            for sandbox in others:
                assert sandbox.run_cell("7", timeout_s=30).outputs == [{"text/plain": "7"}]
        finally:
            for other in others:
                other.close()
    finally:
        victim.close()
    # The next burst brings the second one back.
    assert zygotes.grow("default")
    assert wait_until(lambda: len(zygotes.live("default")) == 2)


def test_closing_during_a_burst_leaves_no_zygote_or_kernel(tmp_path) -> None:
    backend = LocalSandboxBackend(
        str(tmp_path / "root"), standbys=0, sizing=Sizing(disk_mb=2), zygotes_per_image=2
    )
    backend.warm_up()
    sandboxes = [backend.start("default", files={}) for _ in range(32)]
    # 32 resets at once are a burst: a second zygote is booting or up.
    assert backend._zygotes._booting.get("default") or len(backend._zygotes.pids("default")) == 2
    backend.close()
    assert backend._zygotes.pids("default") == []
    root = os.path.realpath(tmp_path / "root")
    for sandbox in sandboxes:
        with pytest.raises(SandboxError):
            sandbox.run_cell("1", timeout_s=5)
    left = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if root.encode() in f.read():
                    left.append(pid)
        except OSError:
            pass
    assert not left, "every zygote of the closed backend exited"


def test_a_second_zygote_that_cannot_boot_is_not_added(caplog) -> None:
    backend = LocalSandboxBackend(standbys=0, sizing=Sizing(disk_mb=2), zygotes_per_image=2)
    try:
        backend.warm_up()

        def refuse(image: str):
            raise SandboxError("the image's packages are gone")

        backend._zygotes._spec_of = refuse  # type: ignore[method-assign]
        assert backend._zygotes.grow("default")
        assert wait_until(lambda: "could not start another zygote" in caplog.text)
        assert not backend._zygotes._booting.get("default")
        assert len(backend._zygotes.pids("default")) == 1
        sandbox = backend.start("default", files={})
        try:
            assert sandbox.run_cell("1 + 1", timeout_s=30).outputs == [{"text/plain": "2"}]
        finally:
            sandbox.close()
    finally:
        backend.close()


def test_a_server_sized_for_bursts_boots_its_zygotes_at_warm_up() -> None:
    backend = LocalSandboxBackend(standbys=0, max_standbys=8, zygotes_per_image=2)
    try:
        backend.warm_up()
        # Booted in the background: warm_up returns once the first one is ready.
        assert wait_until(lambda: len(backend._zygotes.live("default")) == 2)
        first, second = backend._zygotes.pids("default")
        assert first != second
    finally:
        backend.close()
    fixed = LocalSandboxBackend(standbys=0, zygotes_per_image=2)
    try:
        fixed.warm_up()
        assert len(fixed._zygotes.pids("default")) == 1, "a fixed pool boots more only on a burst"
        assert not fixed._zygotes._booting.get("default")
    finally:
        fixed.close()


def test_resets_on_a_cold_image_each_get_their_own_kernel(monkeypatch) -> None:
    """Resets that arrive while the image's first zygote boots wait for it, then take it one
    at a time: none may talk to it while the request that booted it does (their replies would
    cross, and a kernel would be handed out under another slot's name). The booting request
    holds on after the boot until another one asks the zygote to fork (or 1 s passes, which is
    what happens when the zygote is rightly lent to the booting request alone)."""
    asked = threading.Event()
    in_flight: dict[int, int] = {}
    most_at_once = 0
    counting = threading.Lock()
    fork = ZygoteProcess.fork

    def counting_fork(self, spec):
        nonlocal most_at_once
        asked.set()
        with counting:
            in_flight[self.host_pid] = in_flight.get(self.host_pid, 0) + 1
            most_at_once = max(most_at_once, in_flight[self.host_pid])
        try:
            return fork(self, spec)
        finally:
            with counting:
                in_flight[self.host_pid] -= 1

    monkeypatch.setattr(ZygoteProcess, "fork", counting_fork)
    backend = LocalSandboxBackend(standbys=0, sizing=Sizing(disk_mb=2), zygotes_per_image=1)
    booted = backend._zygotes._on_boot
    backend._zygotes._on_boot = lambda image: (asked.wait(1), booted(image))  # type: ignore[method-assign]
    sandboxes: list[LocalSandbox] = []
    try:
        with ThreadPoolExecutor(6) as pool:
            sandboxes = list(pool.map(lambda _: backend.start("default", files={}), range(6)))
        assert most_at_once == 1, f"{most_at_once} requests were in flight on one zygote at once"
        for sandbox in sandboxes:
            placement = sandbox._socket_link.order.wait(60)
            result = sandbox.run_cell("import os; os.getcwd()", timeout_s=30)
            assert result.outputs == [{"text/plain": repr(placement.workdir)}], placement.slot
            assert placement.workdir.endswith(f"/{placement.slot.name}/work")
    finally:
        for sandbox in sandboxes:
            sandbox.close()
        backend.close()


def test_a_reply_about_another_slot_is_refused(tmp_path) -> None:
    """A reply is only used by the request it answers: one about another slot (a request
    whose reply nobody read) means client and zygote are out of step, and the zygote is
    refused as if it had died, never trusted with the wrong kernel."""
    zygote = ZygoteProcess("default", host_root=str(tmp_path))
    try:
        request = {
            "op": "fork",
            "uid": None,
            "fresh": True,
            "sizing": Sizing(disk_mb=2).to_json(),
            "output_limit_bytes": 1 << 20,
        }
        zygote._control.send(json.dumps({**request, "slot": "e1"}).encode())  # reply unread
        with pytest.raises(ZygoteDied, match="about slot 'e1' when asked about 'e2'"):
            zygote.fork({**request, "slot": "e2"})
    finally:
        zygote.stop()
