"""``/envs``: create, edit, build and inspect sandbox environments over REST.

``mount_envs(app, runtime)`` builds the server's ``EnvironmentService`` (state under
``settings.state_dir/envs``; one per runtime, reused by every app built on it), attaches it
to the runtime (``runtime.environments``, read at reset to bind episodes) and to a backend
that serves baked packages (``ServesBakedPackages``, the local one: ``use_image_resolver``
turns a baked image name into the zygote's spec), and
adds the routes:

* ``GET /envs`` -> ``{"environments": [{name, description, hash, status, progress, elapsed_s,
  error, ...}]}``
* ``GET /envs/templates`` -> ``{"templates": [recipe + hash]}``
* ``POST /envs`` (recipe fields, or ``{"template": "data-science", "name": ...}``) -> 201
* ``GET /envs/{name}`` -> summary + ``recipe``; ``PATCH``/``PUT /envs/{name}`` (changed fields)
* ``DELETE /envs/{name}``; ``POST /envs/{name}/build[?force=true]``
* ``GET /envs/{name}/status``; ``GET /envs/{name}/logs`` -> ``{name, status, log}``

A backend whose ``baker()`` is a ``SandboxBaker`` (``bake``, ``is_built``; Docker,
Modal, E2B) builds its own artifact in the build step; the local backend gets
the local baker (``envs.recipes.local_bake``).

Errors: 404 unknown name, 409 name taken, 422 invalid recipe, each with a ``detail``
saying what to fix. The bearer-token middleware guards these routes like every other.

A build installs packages chosen by whoever calls these routes, so the mutating ones
(create, change, delete, build) need the server to have a token (which the middleware
then checks) or an explicit ``--allow-builds``: without either, any local user could
reach them. They answer 403 saying so; the read-only routes stay open.
"""

from __future__ import annotations

import logging
import os
from enum import Enum
from typing import Annotated, Any

from fastapi import Body, Depends, FastAPI, HTTPException, Query

from analyst_env.envs.capabilities import (
    BakesArtifacts,
    ServesBakedPackages,
    protections_of,
    reports_confinement,
)
from analyst_env.envs.recipes.recipe import RecipeError
from analyst_env.envs.recipes.service import (
    EnvironmentExists,
    EnvironmentService,
    UnknownEnvironment,
)

log = logging.getLogger(__name__)


def _under_tmp(path) -> bool:
    real = os.path.realpath(path)
    return real == "/tmp" or real.startswith("/tmp/")


def _errors(fn):
    """Turn the service's exceptions into HTTP errors with the message as ``detail``."""
    try:
        return fn()
    except UnknownEnvironment as exc:
        raise HTTPException(404, str(exc)) from None
    except EnvironmentExists as exc:
        raise HTTPException(409, str(exc)) from None
    except RecipeError as exc:
        raise HTTPException(422, str(exc)) from None


def _detail(service: EnvironmentService, name: str) -> dict[str, Any]:
    recipe = service.get(name)
    return {**service.summary(recipe), "recipe": recipe.model_dump()}


def mount_envs(app: FastAPI, runtime) -> EnvironmentService:
    """Add the ``/envs`` routes to ``app`` and bind ``runtime``'s episodes to its environments."""
    backend = runtime.backend
    service = runtime.environments
    if not isinstance(service, EnvironmentService):
        # One service per runtime: apps sharing a runtime share its builds. Remote backends
        # build their own artifacts (bake/is_built); the local one gets a baked package dir.
        baker = backend.baker() if isinstance(backend, BakesArtifacts) else None
        service = EnvironmentService(
            runtime.settings.state_dir,
            backend=backend.name,
            bake=baker.bake if baker else None,
            is_built=baker.is_built if baker else None,
        )
    if runtime.backend.name == "local" and _under_tmp(service.images_dir):
        log.warning(
            "sandbox environment images are under /tmp (%s): the local sandbox's private "
            "root has its own /tmp, so kernels cannot lazily import their packages or run them in "
            "subprocesses; set ANALYST_ENV_STATE_DIR outside /tmp",
            service.images_dir,
        )
    runtime.environments = service
    if isinstance(backend, ServesBakedPackages):
        backend.use_image_resolver(service.local_image)
        service.forget_image = backend.forget_image
    app.state.environments = service
    # Shutdown only waits briefly for running builds: another app may share the runtime, and
    # a build cut short is marked failed at the next start.
    app.router.on_shutdown.append(service.builder.join)
    tags: list[str | Enum] = ["Sandbox environments"]
    settings = runtime.settings

    def builds_allowed() -> None:
        if protections_of(backend).get("unconfined"):  # isolation none: fail_closed refuses
            raise HTTPException(
                403,
                "sandbox-environment builds are off under isolation none (their import check "
                "would run unconfined); restart with a real isolation (ANALYST_ENV_ISOLATION=auto)",
            )
        # Fail closed: a build made here, for a backend that claims no confinement for its check.
        if not isinstance(backend, BakesArtifacts) and not reports_confinement(backend):
            raise HTTPException(
                403,
                f"sandbox-environment builds are off on the {backend.name} backend: it neither "
                "builds its own artifacts nor reports the protections the build's import check "
                "would run under",
            )
        if not settings.token and not settings.allow_builds:
            raise HTTPException(
                403,
                "creating, changing and building sandbox environments installs packages on this "
                "server: start it with a token (--token or ANALYST_ENV_TOKEN) or with "
                "--allow-builds (ANALYST_ENV_ALLOW_BUILDS=1)",
            )

    mutating = [Depends(builds_allowed)]

    @app.get("/envs", tags=tags)
    def list_environments() -> dict:
        """Every user-made sandbox environment with its build status."""
        return {"environments": [service.summary(r) for r in service.list()]}

    @app.get("/envs/templates", tags=tags)
    def list_templates() -> dict:
        """The built-in templates an environment can be created from."""
        return {
            "templates": [
                {**t.model_dump(), "hash": t.image_hash()} for t in service.templates.values()
            ]
        }

    @app.post("/envs", tags=tags, status_code=201, dependencies=mutating)
    def create_environment(body: Annotated[dict[str, Any], Body()]) -> dict:
        """Create an environment from recipe fields, or from ``template`` (a copy); its build
        starts."""
        body = dict(body)
        template = body.pop("template", None)
        if template is not None and not isinstance(template, str):
            raise HTTPException(422, "template: must be a template name")

        def create():
            recipe = service.create(body, template=template)
            return _detail(service, recipe.name)

        return _errors(create)

    @app.get("/envs/{name}", tags=tags)
    def get_environment(name: str) -> dict:
        """One environment: its recipe and build status."""
        return _errors(lambda: _detail(service, name))

    @app.patch("/envs/{name}", tags=tags, dependencies=mutating)
    @app.put(
        "/envs/{name}", tags=tags, operation_id="replace_environment_fields", dependencies=mutating
    )
    def update_environment(name: str, body: Annotated[dict[str, Any], Body()]) -> dict:
        """Change fields of an environment; a change of build inputs starts a rebuild."""

        def update():
            _, rebuild = service.update(name, body)
            return {**_detail(service, name), "rebuild": rebuild}

        return _errors(update)

    @app.delete("/envs/{name}", tags=tags, dependencies=mutating)
    def delete_environment(name: str) -> dict:
        """Delete an environment; tasks bound to it then run in the default image, with a
        warning."""
        _errors(lambda: service.delete(name))
        return {"deleted": name}

    @app.post("/envs/{name}/build", tags=tags, dependencies=mutating)
    def build_environment(
        name: str, force: bool = Query(False, description="Rebuild even if ready")
    ) -> dict:
        """Start building the environment's image (no-op while it builds, or when ready unless
        forced)."""
        return _errors(lambda: service.build(name, force=force))

    @app.get("/envs/{name}/status", tags=tags)
    def environment_status(name: str) -> dict:
        """Build status: pending, building (progress, elapsed_s), ready or failed (error)."""
        return _errors(lambda: service.summary(service.get(name)))

    @app.get("/envs/{name}/logs", tags=tags)
    def environment_logs(name: str) -> dict:
        """The log of the latest build of the environment's current image."""
        return _errors(
            lambda: {
                "name": name,
                "status": service.summary(service.get(name))["status"],
                "log": service.logs(name),
            }
        )

    return service
