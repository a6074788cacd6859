"""Two servers on one host: disjoint slot uids, so neither's episodes can touch the other's.

Each backend claims a uid range for its lifetime (``uid_ranges``); a second
backend gets the next free range, a configured base another server holds is
refused with the holder named, and a kernel of one backend cannot signal or
read the other's kernels (nor its own zygote's siblings outside its namespace).
"""

from __future__ import annotations

import os

import pytest

from analyst_env.envs.local import LocalSandboxBackend, uid_ranges

ROOT = os.geteuid() == 0
pytestmark = pytest.mark.skipif(not ROOT, reason="per-slot uids need the server to run as root")


def value(sandbox, code: str) -> str:
    result = sandbox.run_cell(code, timeout_s=20)
    assert result.error is None, result.error
    return result.outputs[0]["text/plain"]


def test_two_backends_hold_disjoint_uid_ranges_and_cannot_reach_each_other():
    a = LocalSandboxBackend(standbys=0, max_slots=64)
    b = LocalSandboxBackend(standbys=0, max_slots=64)
    try:
        range_a, range_b = a.protections()["uid_range"], b.protections()["uid_range"]
        first_a, last_a = map(int, range_a.split("-"))
        first_b, last_b = map(int, range_b.split("-"))
        assert last_a < first_b or last_b < first_a  # disjoint
        with pytest.raises(uid_ranges.UidRangeBusy, match=f"pid {os.getpid()}"):
            LocalSandboxBackend(standbys=0, max_slots=64, uid_base=first_a + 10)
        victim, attacker = a.start("default", files={}), b.start("default", files={})
        victim_uid = int(value(victim, "import os; os.getuid()"))
        attacker_uid = int(value(attacker, "import os; os.getuid()"))
        assert first_a <= victim_uid <= last_a and first_b <= attacker_uid <= last_b
        victim.run_cell("open('secret.txt', 'w').write('s3cret')", timeout_s=10)
        victim_inside = int(value(victim, "os.getpid()"))
        own_inside = int(value(attacker, "os.getpid()"))
        targets = [victim.kernel_pid, 1] + ([victim_inside] if victim_inside != own_inside else [])
        out = value(
            attacker,
            "import os, glob\nseen = []\n"
            f"for pid in {targets}:\n"
            "    try:\n        os.kill(pid, 9); seen.append('KILLED')\n"
            "    except OSError as e:\n        seen.append(type(e).__name__)\n"
            "seen.append(len(glob.glob('/slots/*/work/secret.txt')))\n"
            "seen",
        )
        assert "KILLED" not in out and out.endswith("0]"), out
        attacker.run_shell("kill -9 -1", timeout_s=5)
        assert value(victim, "open('secret.txt').read()") == "'s3cret'"
    finally:
        a.close()
        b.close()


def test_a_closed_backend_gives_its_range_back():
    a = LocalSandboxBackend(standbys=0, max_slots=16)
    base = int(a.protections()["uid_range"].split("-")[0])
    a.close()
    again = LocalSandboxBackend(standbys=0, max_slots=16, uid_base=base)
    again.close()
