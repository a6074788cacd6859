"""Reset latency of the sandbox backends on this machine: ``start()`` until a first ``1+1`` result.

Run: ``.venv/bin/python tests/backends/measure_resets.py [n]`` (with
``ANALYST_ENV_TEST_DOCKER=1`` and an engine at ``DOCKER_HOST`` it measures Docker too). The Modal,
Daytona, E2B and OpenSandbox
figures are measured against the local fakes (``fake_modal``, ``fake_daytona``, ``fake_e2b``,
``fake_opensandbox``): they show this project's share (runner fork, framing, SDK
overhead, file staging), not the services' own latency, which needs the real ones.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))


def _measure(backend, files, n: int) -> list[float]:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        sandbox = backend.start("default", files=files)
        result = sandbox.run_cell("1+1", timeout_s=60)
        times.append((time.perf_counter() - started) * 1000)
        assert result.outputs == [{"text/plain": "2"}], result
        sandbox.close()
        time.sleep(2.0)  # an episode lasts at least this long; pools and standbys refill meanwhile
    return times


def _report(name: str, times: list[float]) -> None:
    print(
        f"{name:<34} median {statistics.median(times):8.1f} ms  "
        f"[{min(times):.1f}-{max(times):.1f}]  n={len(times)}"
    )


def task_files() -> dict[str, str]:
    """The one task file every measurement stages: a 1,000-row CSV."""
    data = os.path.join(tempfile.mkdtemp(), "sales.csv")
    with open(data, "w") as f:
        f.write("region,amount\n" + "west,1\n" * 1000)
    return {"sales.csv": data}


def measure_warm_and_cold(
    label: str, make: Callable[[int], Any], files: dict[str, str], n: int, cold: str = "new slot"
) -> None:
    """Report ``n`` resets on ``make(1)`` once its warm slot is up, then ``n // 3`` (at least 3)
    on ``make(0)``, which starts a slot for each (``make(warm)`` builds the backend)."""
    warm = make(1)
    warm.start("default", files={}).close()
    time.sleep(10)
    _report(f"{label}, warm slot", _measure(warm, files, n))
    warm.close()
    each = make(0)
    _report(f"{label}, {cold} each", _measure(each, files, max(3, n // 3)))
    each.close()


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    files = task_files()

    from analyst_env.envs.local import LocalSandboxBackend

    local = LocalSandboxBackend(standbys=2)
    local.warm_up()
    time.sleep(3)
    _report("local (standby kernels)", _measure(local, files, n))
    local.close()

    import fake_modal

    from analyst_env.envs.remote.modal_backend import ModalSandboxBackend
    from analyst_env.envs.remote.options import WarmPool
    from analyst_env.envs.remote.runner_image import resolve_default

    def modal(warm: int) -> ModalSandboxBackend:
        return ModalSandboxBackend(
            resolve_default,
            token_id="a",
            token_secret="b",
            sdk=fake_modal,
            pool=WarmPool(warm=warm),
        )

    measure_warm_and_cold("modal, fake SDK", modal, files, n)

    if os.environ.get("ANALYST_ENV_TEST_DOCKER") == "1":
        from analyst_env.envs.remote.docker_backend import DockerSandboxBackend

        network = os.environ.get("ANALYST_ENV_TEST_DOCKER_BUILD_NETWORK")

        def docker(warm: int) -> DockerSandboxBackend:
            return DockerSandboxBackend(
                resolve_default, pool=WarmPool(warm=warm), build_network=network
            )

        measure_warm_and_cold("docker (runc)", docker, files, n, cold="new container")

    import fake_daytona

    from analyst_env.envs.remote.daytona_backend import DaytonaSandboxBackend

    with fake_daytona.FakeDaytona() as api:

        def daytona(warm: int) -> DaytonaSandboxBackend:
            return DaytonaSandboxBackend(
                resolve_default, api_key=api.api_key, api_url=api.api_url, pool=WarmPool(warm=warm)
            )

        measure_warm_and_cold("daytona, fake API", daytona, files, n)

    import fake_e2b

    from analyst_env.envs.remote.e2b_backend import E2BSandboxBackend

    os.environ["E2B_DEBUG"] = "true"
    with fake_e2b.FakeE2B():
        e2b = E2BSandboxBackend(resolve_default, api_key=None, template="code-interpreter-v1")
        _report("e2b, real SDK, fake services", _measure(e2b, files, max(3, n // 3)))
        e2b.close()

    _measure_opensandbox(files, n)


def _measure_opensandbox(files: dict[str, str], n: int) -> None:
    """OpenSandbox through its real SDK against ``fake_opensandbox`` (skipped without the SDK)."""
    try:
        import fake_opensandbox
    except ImportError:
        return
    from analyst_env.envs.remote.opensandbox_backend import OpenSandboxBackend
    from analyst_env.envs.remote.options import WarmPool
    from analyst_env.envs.remote.runner_image import resolve_default

    with fake_opensandbox.FakeOpenSandbox() as fake:

        def opensandbox(warm: int) -> OpenSandboxBackend:
            return OpenSandboxBackend(
                resolve_default, domain=fake.domain, image="runner", pool=WarmPool(warm=warm)
            )

        measure_warm_and_cold("opensandbox, real SDK, fake", opensandbox, files, n)


if __name__ == "__main__":
    main()
