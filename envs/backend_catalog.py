"""What each sandbox backend is and what it needs before ``serve`` can use it.

``BACKENDS`` (``envs/backends.py``) says how to build a backend; this says, without
importing it, what a user must add first: the extra that installs its SDK, and the
credentials the SDK reads (environment variables, or the file its own login writes).
``analyst-env backends`` prints it for every backend; ``serve`` still checks for real
at start (a missing SDK or credential, a service that does not answer: one line).

Example:
    >>> readiness("local").usable
    True
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class BackendInfo:
    """One backend as a user chooses it.

    Attributes:
        summary: What runs an episode, in a few words.
        sdk: The vendor SDK's import name (``None``: nothing to install).
        extra: The ``analyst-env[...]`` extra that installs it.
        variables: Environment variables the SDK needs, all of them ...
        or_files: ... or any of these files, which its own login (or the platform) writes
            instead (``~`` expanded).
    """

    summary: str
    sdk: str | None = None
    extra: str | None = None
    variables: tuple[str, ...] = ()
    or_files: tuple[str, ...] = ()


BACKEND_CATALOG: dict[str, BackendInfo] = {
    "local": BackendInfo(
        "a fork server on this host: namespaces or Landlock, cgroups, seccomp (the default)"
    ),
    "docker": BackendInfo(
        "a container per warm slot on a Docker engine, no network, read-only root",
        sdk="docker",
        extra="docker",
        variables=("DOCKER_HOST",),
        or_files=("/var/run/docker.sock",),
    ),
    "modal": BackendInfo(
        "a Modal sandbox per warm slot (gVisor), images built by Modal",
        sdk="modal",
        extra="modal",
        variables=("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET"),
        or_files=("~/.modal.toml",),
    ),
    "agent-sandbox": BackendInfo(
        "a Kubernetes agent sandbox per warm slot, claimed from a SandboxWarmPool",
        sdk="k8s_agent_sandbox",
        extra="agent-sandbox",
        variables=("KUBECONFIG",),
        or_files=("~/.kube/config", "/var/run/secrets/kubernetes.io/serviceaccount/token"),
    ),
    "daytona": BackendInfo(
        "a Daytona sandbox per warm slot, images as Daytona snapshots",
        sdk="daytona",
        extra="daytona",
        variables=("DAYTONA_API_KEY",),
    ),
    "opensandbox": BackendInfo(
        "an OpenSandbox sandbox per warm slot, on a self-hosted opensandbox-server",
        sdk="opensandbox",
        extra="opensandbox",
        variables=("OPEN_SANDBOX_DOMAIN",),
    ),
    "e2b": BackendInfo(
        "an E2B sandbox (Firecracker microVM) with E2B's own Jupyter kernel",
        sdk="e2b_code_interpreter",
        extra="e2b",
        variables=("E2B_API_KEY",),
    ),
    "runloop": BackendInfo(
        "a Runloop devbox (micro-VM) per warm slot, images as Runloop blueprints",
        sdk="runloop_api_client",
        extra="runloop",
        variables=("RUNLOOP_API_KEY",),
    ),
    "azure": BackendInfo(
        "an Azure Container Apps sandbox per warm slot, images as disk images; the runner is "
        "reached by short requests (about two per message, docs/backend-azure.md)",
        sdk="azure.containerapps.sandbox",
        extra="azure",
        variables=(
            "AZURE_SUBSCRIPTION_ID",
            "AZURE_RESOURCE_GROUP",
            "AZURE_SANDBOX_GROUP",
            "AZURE_SANDBOX_REGISTRY",
            "AZURE_REGION",
        ),
    ),
    "deno": BackendInfo(
        "a Deno sandbox (Linux microVM) per warm slot, images as Deno snapshots",
        sdk="deno_sandbox",
        extra="deno",
        variables=("DENO_DEPLOY_TOKEN",),
    ),
    "prime": BackendInfo(
        "a Prime Intellect sandbox (VM) per warm slot, images built by Prime's image service",
        sdk="prime_sandboxes",
        extra="prime",
        variables=("PRIME_API_KEY",),
    ),
    "coreweave": BackendInfo(
        "a CoreWeave sandbox (Kata container) per warm slot, running ANALYST_ENV_COREWEAVE_IMAGE "
        "or recipe images pushed to ANALYST_ENV_COREWEAVE_IMAGE_REPOSITORY; the SDK runs in a "
        "helper process",
        sdk="cwsandbox",
        extra="coreweave",
        variables=("CWSANDBOX_API_KEY",),
    ),
}


@dataclass(frozen=True)
class Readiness:
    """Whether a backend's SDK is installed and its credentials are present."""

    installed: bool
    missing: tuple[str, ...]
    """What to set (or install) before ``serve`` can use it; empty when nothing is missing."""

    @property
    def usable(self) -> bool:
        return self.installed and not self.missing


def importable(module: str) -> bool:
    """Whether ``module`` is installed (a dotted name whose parent package is missing is not)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def readiness(name: str) -> Readiness:
    """What backend ``name`` still needs here (looked up, never imported or contacted).

    Raises:
        KeyError: No backend has that name.
    """
    info = BACKEND_CATALOG[name]
    installed = info.sdk is None or importable(info.sdk)
    missing: list[str] = []
    if not installed:
        missing.append(f"pip install 'analyst-env[{info.extra}]'")
    unset = [v for v in info.variables if not os.environ.get(v)]
    has_file = any(Path(f).expanduser().exists() for f in info.or_files)
    if unset and not has_file:
        what = "set " + ", ".join(unset)
        missing.append(f"{what} (or {' or '.join(info.or_files)})" if info.or_files else what)
    return Readiness(installed, tuple(missing))


def describe(name: str, spec: str | None) -> tuple[BackendInfo, Readiness]:
    """``name``'s entry and readiness; a plugin's backend (not in the catalogue) is described
    by where it lives, and what it needs is its own to check."""
    if name in BACKEND_CATALOG:
        return BACKEND_CATALOG[name], readiness(name)
    return BackendInfo(f"a plugin's backend ({spec})"), Readiness(True, ())
