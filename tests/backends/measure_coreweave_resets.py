"""Reset latency of the coreweave backend against ``fake_coreweave``: ``start()`` until ``1+1``.

Run: ``.venv/bin/python tests/backends/measure_coreweave_resets.py [n]``. The figures show this
project's share (runner upload and fork, base64 line relay, the agent process and its pipes,
the SDK's gRPC stream), not CoreWeave's own latency, which needs the real service. Uses
``measure_resets``' loop.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))


def main() -> None:
    from fake_coreweave_process import FakeCoreWeaveProcess
    from measure_resets import measure_warm_and_cold, task_files

    from analyst_env.envs.remote.coreweave_backend import CoreWeaveSandboxBackend
    from analyst_env.envs.remote.options import WarmPool
    from analyst_env.envs.remote.runner_image import resolve_default

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    with FakeCoreWeaveProcess() as api:

        def coreweave(warm: int) -> CoreWeaveSandboxBackend:
            return CoreWeaveSandboxBackend(
                resolve_default,
                api_key=api.api_key,
                base_url=api.base_url,
                image="registry.example/analyst-env-runner",
                pool=WarmPool(warm=warm),
            )

        measure_warm_and_cold("coreweave, fake API", coreweave, task_files(), n, cold="new sandbox")


if __name__ == "__main__":
    main()
