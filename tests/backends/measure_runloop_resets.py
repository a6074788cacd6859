"""Reset latency of the Runloop backend against ``fake_runloop``: ``start()`` until ``1+1``.

Run: ``.venv/bin/python tests/backends/measure_runloop_resets.py [n]``. The figures show this
project's share (runner upload and fork, base64 line relay, SSE, the SDK's overhead), not
Runloop's own latency, which needs the real service. Uses ``measure_resets``' loop.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))


def main() -> None:
    import fake_runloop
    from measure_resets import measure_warm_and_cold, task_files

    from analyst_env.envs.remote.options import WarmPool
    from analyst_env.envs.remote.runloop_backend import RunloopSandboxBackend
    from analyst_env.envs.remote.runner_image import resolve_default

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    with fake_runloop.FakeRunloop() as api:

        def runloop(warm: int) -> RunloopSandboxBackend:
            return RunloopSandboxBackend(
                resolve_default,
                api_key=api.api_key,
                base_url=api.base_url,
                pool=WarmPool(warm=warm),
            )

        measure_warm_and_cold("runloop, fake API", runloop, task_files(), n, cold="new devbox")


if __name__ == "__main__":
    main()
