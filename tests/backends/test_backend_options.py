"""The remote backends' options (``envs/remote/options.py``) and how the settings set them.

Each backend's ``from_settings`` is run with its class swapped for one that only records
what it is given, so the mapping from ``ANALYST_ENV_*`` to the options is checked for
every backend without a vendor to reach: the settings set cores, memory, the connect
timeout and the warm slots; the disk limit only where the disk is the episode's working
space; every other field keeps the backend's own default.
"""

from __future__ import annotations

import importlib

import pytest

from analyst_env.envs.backends import BACKENDS
from analyst_env.envs.remote.options import Sizing, Timeouts, WarmPool
from analyst_env.envs.remote.runner_image import resolve_default
from analyst_env.server.settings import Settings

SIZED = Sizing(cpus=2.0, memory_mb=1024)
EXPECTED = {
    "docker": {
        "sizing": Sizing(cpus=2.0, memory_mb=1024, disk_mb=512),
        "timeouts": Timeouts(connect_s=3.0, boot_s=120.0),
        "pool": WarmPool(warm=4),
    },
    "modal": {"sizing": SIZED, "timeouts": Timeouts(connect_s=3.0), "pool": WarmPool(warm=4)},
    "e2b": {
        "sizing": Sizing(cpus=2.0, memory_mb=1024, disk_mb=512),
        "timeouts": Timeouts(connect_s=3.0),
    },
    "daytona": {"sizing": SIZED, "timeouts": Timeouts(connect_s=3.0), "pool": WarmPool(warm=4)},
    "agent-sandbox": {"timeouts": Timeouts(connect_s=3.0), "pool": WarmPool(warm=4)},
    "opensandbox": {
        "sizing": SIZED,
        "timeouts": Timeouts(connect_s=3.0, boot_s=120.0),
        "pool": WarmPool(warm=4),
    },
    "runloop": {"sizing": SIZED, "timeouts": Timeouts(connect_s=3.0), "pool": WarmPool(warm=4)},
    "azure": {"sizing": SIZED, "timeouts": Timeouts(connect_s=3.0), "pool": WarmPool(warm=4)},
    "prime": {"sizing": SIZED, "timeouts": Timeouts(connect_s=3.0), "pool": WarmPool(warm=4)},
    "coreweave": {"sizing": SIZED, "timeouts": Timeouts(connect_s=3.0), "pool": WarmPool(warm=4)},
    "deno": {
        "sizing": Sizing(cpus=2.0, memory_mb=1024, disk_mb=8192),
        "timeouts": Timeouts(connect_s=3.0, sandbox_s=1800),
        "pool": WarmPool(warm=4),
    },
}


def _options_given(name: str, settings: Settings, monkeypatch) -> dict:
    """The options backend ``name``'s ``from_settings`` passes to its constructor."""
    module = importlib.import_module(BACKENDS[name].partition(":")[0])
    cls = module.from_settings.__annotations__["return"]
    given: dict = {}

    class Recorder(getattr(module, cls)):
        def __init__(self, resolve, **kwargs) -> None:
            given.update(kwargs)

    monkeypatch.setattr(module, cls, Recorder)
    module.from_settings(settings)
    return {k: v for k, v in given.items() if k in ("sizing", "timeouts", "pool")}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_settings_set_each_backends_options_over_its_defaults(name, monkeypatch, tmp_path):
    for variable in ("SUBSCRIPTION_ID", "RESOURCE_GROUP", "SANDBOX_GROUP", "SANDBOX_REGISTRY"):
        monkeypatch.setenv(f"AZURE_{variable}", "x")
    monkeypatch.setenv("AZURE_REGION", "westus")
    settings = Settings(
        backend=name,
        state_dir=str(tmp_path),
        cpu_limit=2.0,
        memory_limit_mb=1024,
        disk_limit_mb=512,
        backend_connect_timeout_s=3.0,
        remote_warm_slots=4,
    )
    assert _options_given(name, settings, monkeypatch) == EXPECTED[name]


def test_every_remote_backend_is_covered():
    assert set(EXPECTED) == set(BACKENDS) - {"local"}


def test_a_warm_pool_is_checked_when_made():
    with pytest.raises(ValueError, match="warm must be >= 0 and max_episodes >= 1"):
        WarmPool(warm=-1)
    with pytest.raises(ValueError, match="warm must be >= 0 and max_episodes >= 1"):
        WarmPool(max_episodes=0)


def test_docker_needs_a_disk_size_for_work():
    from analyst_env.envs.remote.docker_backend import DockerSandboxBackend

    with pytest.raises(ValueError, match="needs sizing.disk_mb"):
        DockerSandboxBackend(resolve_default, sizing=Sizing())
