"""``stop_agent_processes`` and ``run_verifier`` on every backend: out of the agent's reach, or
refused.

The contract cases of ``test_sandbox_contract`` (the local fork server, the slot
runner behind the fake Modal SDK, the fake Daytona API, the fake cluster and the fake
OpenSandbox server, E2B on its fake services). A detached process
the agent's cell started must be dead once ``stop_agent_processes`` returns, and
a verify command must not see what the cell put in its environment; a backend
that cannot stop the agent (E2B) refuses, and so does one whose sandbox could
write the directories a verify command trusts (the runner on a host where it runs
as root, as in a Modal or OpenSandbox sandbox).
"""

from __future__ import annotations

import pytest
from test_sandbox_contract import case, sandbox  # noqa: F401 - the shared fixtures

from analyst_env.envs import verifier_env
from analyst_env.envs.sandbox import VerifierUnavailable

DETACHED = """
import os, subprocess
p = subprocess.Popen(["setsid", "sleep", "300"], start_new_session=True)
os.environ["PATH"] = os.getcwd() + ":" + os.environ["PATH"]
os.environ["AGENT_MARK"] = "set"
print(p.pid)
"""


def _host_could_write_trusted_dirs() -> bool:
    """Whether this process (the user the fake Modal's or Daytona's runner runs as) can write a
    directory a verify command trusts."""
    return bool(verifier_env.writable_trusted_dirs(verifier_env.clean_env("/", {})))


def test_agent_processes_are_stopped_and_verifiers_get_a_clean_environment(case, sandbox):  # noqa: F811
    kind = case.backend.name
    started = sandbox.run_cell(DETACHED, timeout_s=60)
    assert started.success, started
    pid = int(started.stdout.strip().splitlines()[-1])
    if kind == "e2b":
        with pytest.raises(VerifierUnavailable, match="cannot stop the agent's processes"):
            sandbox.stop_agent_processes()
        return
    sandbox.stop_agent_processes()
    probe = sandbox.run_shell(f"kill -0 {pid} 2>/dev/null && echo alive || echo gone", timeout_s=20)
    assert probe.stdout.strip() == "gone", probe
    with pytest.raises(Exception, match="no cell runs"):
        sandbox.run_cell("1", timeout_s=10)
    sandbox.run_shell("mkdir -p logs/verifier-x", timeout_s=20)
    check = 'test -z "$AGENT_MARK" && test "$HOME" = "$VERIFIER_DIR" && echo "$PATH"'
    # The fakes of Modal, Daytona, Runloop, Azure, Deno, Prime, CoreWeave, the cluster and
    # OpenSandbox run the runner as this process's user.
    vendors = ("modal", "daytona", "runloop", "azure", "deno", "prime", "coreweave")
    vendors = (*vendors, "agent-sandbox")
    if kind in (*vendors, "opensandbox") and _host_could_write_trusted_dirs():
        with pytest.raises(VerifierUnavailable, match="verification refused"):
            sandbox.run_verifier(check, verifier_dir="logs/verifier-x", timeout_s=20)
        return
    result = sandbox.run_verifier(check, verifier_dir="logs/verifier-x", timeout_s=20)
    assert result.exit_code == 0, result
    assert result.stdout.strip().endswith(verifier_env.CLEAN_PATH), result
