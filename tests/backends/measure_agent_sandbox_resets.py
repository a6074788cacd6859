"""Reset latency of the agent-sandbox backend against the fake cluster: ``start()`` until a
first ``1+1`` result, with a warm slot and with a new claim and runner each time.

Run: ``.venv/bin/python tests/backends/measure_agent_sandbox_resets.py [n]``. The fake binds a
claim at once and runs the runner as a local process, so this is this project's share (the
SDK's claim and watch, the exec WebSocket, the runner's boot and fork), not a cluster's own
pod start or the controller's adoption from the warm pool.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))

from fake_agent_sandbox import FakeAgentSandboxCluster  # noqa: E402
from measure_resets import measure_warm_and_cold, task_files  # noqa: E402


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    files = task_files()

    from analyst_env.envs.remote.agent_sandbox_backend import AgentSandboxBackend
    from analyst_env.envs.remote.options import WarmPool
    from analyst_env.envs.remote.runner_image import resolve_default

    os.environ.pop("KUBERNETES_SERVICE_HOST", None)
    with FakeAgentSandboxCluster() as cluster:
        kubeconfig = Path(tempfile.mkdtemp()) / "kubeconfig"
        os.environ["KUBECONFIG"] = str(cluster.kubeconfig(kubeconfig))

        def agent_sandbox(warm: int) -> AgentSandboxBackend:
            return AgentSandboxBackend(
                resolve_default, namespace=cluster.namespace, pool=WarmPool(warm=warm)
            )

        label = "agent-sandbox, fake cluster"
        measure_warm_and_cold(label, agent_sandbox, files, n, cold="new claim")


if __name__ == "__main__":
    main()
