"""The routes that describe the server rather than serve an episode: ``/``, ``/favicon.ico``,
``/sandbox`` and ``/health``.

OpenEnv's ``/health`` says only "healthy"; ours also names the isolation in force, so
an operator's probe sees a server that runs with less than it should. It replaces
OpenEnv's at the same path.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, RedirectResponse

from analyst_env.envs.capabilities import protections_of
from analyst_env.server.route_wrapping import remove_routes
from analyst_env.server.runtime import Runtime
from analyst_env.server.web.routes import STATIC_DIR


def mount_info(app: FastAPI, runtime: Runtime) -> None:
    """Add ``/``, ``/favicon.ico``, ``/sandbox`` and our ``/health`` to ``app``."""

    def protections() -> dict:  # {} for a backend whose vendor owns isolation: nothing claimed
        return protections_of(runtime.backend)

    @app.get("/", include_in_schema=False)
    async def root(request: Request) -> RedirectResponse:
        """``serve`` prints the server's URL: a browser opened there lands on the /web UI (a
        ``?token=`` goes along, as /web's own bootstrap reads it)."""
        query = request.url.query
        return RedirectResponse("/web" + (f"?{query}" if query else ""), status_code=307)

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> FileResponse:
        """The icon browsers ask for on every page (/docs too), instead of a 404 in the log."""
        return FileResponse(STATIC_DIR / "favicon.svg", media_type="image/svg+xml")

    @app.get("/sandbox", tags=["Environment Info"])
    async def sandbox_protections() -> dict:
        """The sandbox backend and the protections in force for its episodes (isolation, limits,
        cgroups).

        Every entry is what start-up verified, not what was requested (a claim that
        could not be verified stops the server: docs/security.md, "Fail-closed rule").
        ``isolation`` is the mode that was tried and is in use, ``limits`` how memory,
        CPU and pids are enforced, ``degraded`` what that mode normally gives but this
        host could not (with the operator's consent), ``stronger_modes_unavailable``
        each stronger mode and why it failed here, ``verified`` what a kernel confined
        this way saw of itself; ``unconfined`` (with a ``warning``) for ``none``.
        """
        return {"backend": runtime.backend.name, "protections": protections()}

    remove_routes(app, "/health")

    @app.get("/health", tags=["Health"])
    async def health() -> dict:
        """Liveness: ``{"status": "healthy", "sandbox": {backend, isolation, degraded,
        verified}}``, plus ``unconfined`` and a ``warning`` under isolation ``none``.

        What was verified at start-up, as ``/sandbox`` reports it."""
        info = protections()
        sandbox = {
            "backend": runtime.backend.name,
            "isolation": info.get("isolation"),
            "degraded": info.get("degraded", ""),
            "verified": info.get("verified", ""),
        }
        if info.get("unconfined"):
            sandbox.update(unconfined=True, warning=info.get("warning", ""))
        return {"status": "healthy", "sandbox": sandbox}
