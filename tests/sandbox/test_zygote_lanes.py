"""More than one zygote per image: kernels forked at once, each zygote confined alike.

Real zygotes, real kernels. An image's first zygote boots on first use; a burst of
resets boots more (``Zygotes.grow``), up to ``zygotes_per_image``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest
from support import wait_dead

from analyst_env.envs.local import LocalSandbox, LocalSandboxBackend
from analyst_env.envs.local.isolation import Sizing
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
