"""Reset latency of the Runloop backend against ``fake_runloop``: ``start()`` until ``1+1``.

Run: ``.venv/bin/python tests/backends/measure_runloop_resets.py [n]``. The figures show this
project's share (runner upload and fork, base64 line relay, SSE, the SDK's overhead), not
Runloop's own latency, which needs the real service. Uses ``measure_resets``' loop.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))


def main() -> None:
    import fake_runloop
    from measure_resets import _measure, _report

    from analyst_env.envs.remote.runloop_backend import RunloopSandboxBackend
    from analyst_env.envs.remote.runner_image import resolve_default

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    data = os.path.join(tempfile.mkdtemp(), "sales.csv")
    with open(data, "w") as f:
        f.write("region,amount\n" + "west,1\n" * 1000)
    files = {"sales.csv": data}
    with fake_runloop.FakeRunloop() as api:
        for warm, label, count in ((1, "warm slot", n), (0, "new devbox each", max(3, n // 3))):
            backend = RunloopSandboxBackend(
                resolve_default, api_key=api.api_key, base_url=api.base_url, warm=warm
            )
            if warm:
                backend.start("default", files={}).close()
                time.sleep(10)
            _report(f"runloop, fake API, {label}", _measure(backend, files, count))
            backend.close()


if __name__ == "__main__":
    main()
