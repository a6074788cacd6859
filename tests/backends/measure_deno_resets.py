"""Reset latency of the Deno backend against ``fake_deno``: ``start()`` until ``1+1``.

Run: ``.venv/bin/python tests/backends/measure_deno_resets.py [n]``. The figures show this
project's share (the runner archive, the FIFO path's one ``spawn`` per request, the SDK's
WebSocket and event loop), not Deno's own latency, which needs the real service. Uses
``measure_resets``' loop.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))


def main() -> None:
    import fake_deno
    from measure_resets import _measure, _report

    from analyst_env.envs.remote.deno_backend import DenoSandboxBackend
    from analyst_env.envs.remote.options import WarmPool
    from analyst_env.envs.remote.runner_image import resolve_default

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    data = os.path.join(tempfile.mkdtemp(), "sales.csv")
    with open(data, "w") as f:
        f.write("region,amount\n" + "west,1\n" * 1000)
    files = {"sales.csv": data}
    api = fake_deno.FakeDeno().start()
    os.environ.update(api.env)
    for warm, label, count in ((1, "warm slot", n), (0, "new sandbox each", max(3, n // 3))):
        backend = DenoSandboxBackend(resolve_default, token=api.token, pool=WarmPool(warm=warm))
        if warm:
            backend.start("default", files={}).close()
            time.sleep(10)
        _report(f"deno, fake API, {label}", _measure(backend, files, count))
        backend.close()


if __name__ == "__main__":
    main()
