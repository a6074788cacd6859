"""Every backend under test, made one way: a table of builders, one a backend, each with what
its vendor can do.

The contract (``test_sandbox_contract.py``) and the parity test (``test_parity.py``) both
run over this table, so a new backend is one builder here (and its fake vendor API in a
``fake_*.py`` and a fixture in ``conftest.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from analyst_env.envs.local import LocalSandboxBackend
from analyst_env.envs.remote.options import WarmPool
from analyst_env.envs.remote.runner_image import resolve_default
from analyst_env.envs.sandbox import SandboxBackend


@dataclasses.dataclass
class Case:
    """One backend under the contract, and what its vendor can do."""

    backend: SandboxBackend
    interrupts: bool = True
    """A cell over its limit is interrupted (variables kept); else its kernel restarts."""
    reports_kernel_death: bool = True
    """A kernel that exits mid-cell comes back as ``KernelDied`` with a fresh kernel."""
    bakes_own_artifacts: bool = True
    """The backend builds an image or template per recipe (``baker()``)."""
    local_parts: bool = False
    """Starts without waiting, keeps standbys, serves baked packages and reports the protections
    it enforces (the fork server)."""
    warms_up: bool = True
    """Has an image to prepare before its first start (``WarmsUp``)."""
    vendor_kernel: bool = False
    """Cells run in the vendor's own Jupyter kernel, which formats tracebacks its way."""


def _local(request: pytest.FixtureRequest) -> Case:
    return Case(
        LocalSandboxBackend(interrupt_grace_s=2), bakes_own_artifacts=False, local_parts=True
    )


def _runner(request: pytest.FixtureRequest) -> Case:
    from analyst_env.envs.remote.modal_backend import ModalSandboxBackend

    sdk = request.getfixturevalue("modal_sdk")
    backend = ModalSandboxBackend(
        resolve_default, token_id="a", token_secret="s", sdk=sdk, pool=WarmPool(warm=0)
    )
    return Case(backend)


def _e2b(request: pytest.FixtureRequest) -> Case:
    pytest.importorskip("e2b", reason="the e2b extra is not installed")
    from analyst_env.envs.remote.e2b_backend import E2BSandboxBackend

    request.getfixturevalue("e2b_debug")
    backend = E2BSandboxBackend(resolve_default, api_key=None, template="code-interpreter-v1")
    return Case(
        backend, interrupts=False, reports_kernel_death=False, warms_up=False, vendor_kernel=True
    )


def _daytona(request: pytest.FixtureRequest) -> Case:
    pytest.importorskip("daytona", reason="the daytona extra is not installed")
    from analyst_env.envs.remote.daytona_backend import DaytonaSandboxBackend

    fake = request.getfixturevalue("daytona_api")
    backend = DaytonaSandboxBackend(
        resolve_default, api_key=fake.api_key, api_url=fake.api_url, pool=WarmPool(warm=0)
    )
    return Case(backend)


def _runloop(request: pytest.FixtureRequest) -> Case:
    pytest.importorskip("runloop_api_client", reason="the runloop extra is not installed")
    from analyst_env.envs.remote.runloop_backend import RunloopSandboxBackend

    fake = request.getfixturevalue("runloop_api")
    backend = RunloopSandboxBackend(
        resolve_default, api_key=fake.api_key, base_url=fake.base_url, pool=WarmPool(warm=0)
    )
    return Case(backend)


def _azure(request: pytest.FixtureRequest) -> Case:
    pytest.importorskip("azure.containerapps.sandbox", reason="the azure extra is not installed")
    from analyst_env.envs.remote.azure_backend import AzureSandboxBackend

    fake = request.getfixturevalue("azure_api")
    return Case(
        AzureSandboxBackend(resolve_default, **fake.backend_options(), pool=WarmPool(warm=0))
    )


def _deno(request: pytest.FixtureRequest) -> Case:
    pytest.importorskip("deno_sandbox", reason="the deno extra is not installed")
    from analyst_env.envs.remote.deno_backend import DenoSandboxBackend

    fake = request.getfixturevalue("deno_api")
    return Case(DenoSandboxBackend(resolve_default, token=fake.token, pool=WarmPool(warm=0)))


def _agent_sandbox(request: pytest.FixtureRequest) -> Case:
    pytest.importorskip("k8s_agent_sandbox", reason="the agent-sandbox extra is not installed")
    from analyst_env.envs.remote.agent_sandbox_backend import AgentSandboxBackend

    cluster = request.getfixturevalue("agent_sandbox_cluster")
    return Case(
        AgentSandboxBackend(resolve_default, namespace=cluster.namespace, pool=WarmPool(warm=0))
    )


def _opensandbox(request: pytest.FixtureRequest) -> Case:
    from analyst_env.envs.remote.opensandbox_backend import OpenSandboxBackend

    fake = request.getfixturevalue("opensandbox_server")
    backend = OpenSandboxBackend(
        resolve_default, domain=fake.domain, image="runner", pool=WarmPool(warm=0)
    )
    return Case(backend)


def _prime(request: pytest.FixtureRequest) -> Case:
    from analyst_env.envs.remote.prime_backend import PrimeSandboxBackend

    fake = request.getfixturevalue("prime_api")
    backend = PrimeSandboxBackend(
        resolve_default, api_key=fake.api_key, base_url=fake.base_url, pool=WarmPool(warm=0)
    )
    return Case(backend)


def _coreweave(request: pytest.FixtureRequest) -> Case:
    from analyst_env.envs.remote.coreweave_backend import CoreWeaveSandboxBackend

    fake = request.getfixturevalue("coreweave_api")
    backend = CoreWeaveSandboxBackend(
        resolve_default,
        api_key=fake.api_key,
        base_url=fake.base_url,
        image="registry.example/analyst-env-runner",
        pool=WarmPool(warm=0),
    )
    return Case(backend)


CASES: dict[str, Callable[[pytest.FixtureRequest], Case]] = {
    "local": _local,
    "runner": _runner,
    "e2b": _e2b,
    "daytona": _daytona,
    "runloop": _runloop,
    "azure": _azure,
    "deno": _deno,
    "agent-sandbox": _agent_sandbox,
    "opensandbox": _opensandbox,
    "prime": _prime,
    "coreweave": _coreweave,
}
