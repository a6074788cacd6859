"""Build a recipe's runner image on a Docker engine, once per tag.

Shared by the backends whose sandboxes run images from the local engine: the
Docker backend, and OpenSandbox with its Docker runtime (its server starts
containers from the same engine, so an image built here is one it can run);
and by CoreWeave, which builds no images: there the image built here is pushed
to a registry (``push_image``) and sandboxes run it from there.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from analyst_env.envs.recipes.recipe import Recipe
from analyst_env.envs.remote.bounded import call_within
from analyst_env.envs.remote.dockerfile import build_context
from analyst_env.envs.sandbox import SandboxError


def connect_engine(sdk: ModuleType, base_url: str | None, connect_s: float) -> Any:
    """A ``docker.DockerClient`` for ``base_url`` (``DOCKER_HOST`` or the default socket when
    None) that answered a ping within ``connect_s``, so a backend refuses at start-up instead
    of hanging on an engine that is not there.

    Raises:
        BackendUnavailable: The ping did not answer in time.
        Exception: The SDK's own error (no socket, refused); the caller says what it needed
            the engine for.
    """
    timeout = int(connect_s) or 1
    client = (
        sdk.DockerClient(base_url=base_url, timeout=timeout)
        if base_url
        else sdk.from_env(timeout=timeout)
    )
    call_within(connect_s + 1, "the Docker engine", client.ping)
    return client


def ensure_image(
    docker: Any,
    sdk: ModuleType,
    recipe: Recipe,
    tag: str,
    *,
    build_network: str | None,
    runner_baked: bool = True,
) -> None:
    """Build ``recipe``'s generated Dockerfile as ``tag`` unless the engine has it.

    Args:
        docker: A ``docker.DockerClient``.
        sdk: The ``docker`` module (for its error types).
        build_network: Network for the build's ``RUN`` steps (``None``: the engine's default).
        runner_baked: Whether the image holds the runner's code (``dockerfile``); without it,
            for a backend that writes the code to each slot itself.

    Raises:
        SandboxError: The build failed (the message ends with the build log's tail).
    """
    try:
        docker.images.get(tag)
        return
    except sdk.errors.ImageNotFound:
        pass
    try:
        docker.images.build(
            fileobj=build_context(recipe, runner_baked=runner_baked),
            custom_context=True,
            tag=tag,
            rm=True,
            forcerm=True,  # a failed step's container too
            network_mode=build_network,
        )
    except sdk.errors.BuildError as exc:
        log = "".join(str(entry.get("stream", "")) for entry in exc.build_log)[-2000:]
        raise SandboxError(
            f"building {tag} for recipe {recipe.name!r} failed: {exc}\n{log}"
        ) from exc


def push_image(docker: Any, sdk: ModuleType, reference: str) -> None:
    """Push ``reference`` (``<repository>:<tag>``, built on this engine) to its registry, with
    the credentials Docker's own configuration (``~/.docker/config.json``, ``DOCKER_CONFIG``,
    credential helpers) gives the SDK.

    Raises:
        SandboxError: The engine or the registry refused the push (the engine reports a
            failed push as a line of its progress stream, not as an error: each is read).
    """
    repository, _, tag = reference.rpartition(":")
    try:
        for line in docker.images.push(repository, tag=tag, stream=True, decode=True):
            if isinstance(line, dict) and line.get("error"):
                raise SandboxError(f"pushing {reference} failed: {line['error']}")
    except sdk.errors.APIError as exc:
        raise SandboxError(f"pushing {reference} failed: {exc}") from exc
