"""``analyst-env serve``: check the command line and the host, start the backend, serve.

Every check that can fail runs before anything is served (a bad dataset, an unknown
backend, a busy port: one ``analyst-env: error:`` line, ``cli_checks.py``), then the
fail-closed rule's start-up checks (``envs/local/fail_closed.py``); a supervisor of
several workers runs them once for all of them (``server/workers.py``).
"""

from __future__ import annotations

import argparse
import signal
import sys

from analyst_env.cli_checks import (
    DATASET_HELP,
    USAGE_STATUS,
    UsageError,
    check_backend,
    check_dataset,
    check_port,
    error_line,
    settings_from_args,
)


def cmd_serve(args: argparse.Namespace) -> int:
    from analyst_env.envs.local.fail_closed import is_loopback as _is_loopback

    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers must be at least 1, got {args.workers}")
    settings = settings_from_args(args)
    if not _is_loopback(args.host) and not settings.token and not args.insecure:
        raise UsageError(
            f"refusing to serve on non-loopback address {args.host!r} without a token. "
            "Set --token (or ANALYST_ENV_TOKEN), or pass --insecure to serve openly."
        )
    if args.listen_fd is None:  # not a worker: check everything before any worker forks
        check_dataset(settings.dataset, several=True)
        if settings.curriculum is not None and not any(
            spec.strip().split(":")[0] == "procedural" for spec in settings.dataset.split(",")
        ):
            raise UsageError("--curriculum needs a procedural dataset (--dataset procedural:SEED)")
        check_backend(settings.backend)
        check_port(args.host, args.port)
    workers = args.workers
    if args.listen_fd is not None:  # a worker itself
        workers = 1
    elif workers is None:
        from analyst_env.server.workers import default_workers

        workers = default_workers()
    refusal = _fail_closed_preflight(args, settings, workers)
    if refusal:
        print(refusal, file=sys.stderr, flush=True)
        return 2
    if workers > 1:  # a supervisor: the workers make their own backends
        from analyst_env.server.workers import supervise

        serve_args = args.argv[args.argv.index("serve") + 1 :]
        return supervise(serve_args, args.host, args.port, workers)
    from analyst_env.envs.capabilities import protections_of
    from analyst_env.envs.sandbox import SandboxError

    try:
        backend = _start_backend(settings)
    except (
        ValueError,
        SandboxError,
    ) as exc:  # unknown backend; SDK, credentials or service missing; a fail-closed refusal
        print(getattr(exc, "line", None) or error_line(exc), file=sys.stderr, flush=True)
        return USAGE_STATUS
    info = protections_of(backend)
    if info:  # the mode in force, named before anything is served
        line = (
            f"analyst-env: sandbox backend {backend.name}, isolation {info.get('isolation', '?')}"
        )
        for key in ("limits", "degraded", "stronger_modes_unavailable"):
            if info.get(key):
                line += f"; {key.replace('_', ' ')}: {info[key]}"
        print(line, file=sys.stderr, flush=True)
        if info.get("unconfined"):
            print(info.get("warning", "analyst-env: WARNING: unconfined"), file=sys.stderr)
    try:
        from analyst_env.server.runtime import Runtime

        runtime = Runtime(settings, backend=backend)
    except (ValueError, OSError) as exc:  # what a loader found wrong inside a dataset's folder
        backend.close()
        raise UsageError(f"cannot load dataset {settings.dataset!r}: {exc}") from None
    except BaseException:
        backend.close()
        raise
    try:
        return _serve(args, settings, runtime)
    finally:
        runtime.close()


def _fail_closed_preflight(args: argparse.Namespace, settings, workers: int) -> str:
    """The start-up checks of the fail-closed rule that need the command line (envs/local/
    fail_closed.py); the refusal line, or ``""`` to go on.

    ``none`` is served only on loopback and without builds. ``--per-process-limits`` is
    passed on as ``ANALYST_ENV_PER_PROCESS_LIMITS`` so every backend of this server (its
    workers, a build's import check) follows it. A supervisor of several workers checks
    the whole rule once itself (one refusal line, not one per worker), by making and
    closing the backend its workers would make.
    """
    import os

    if settings.backend != "local":
        return ""
    from analyst_env.envs.local import fail_closed

    if settings.per_process_limits:
        os.environ[fail_closed.PER_PROCESS_ENV] = "1"
    try:
        if settings.isolation == "none":
            fail_closed.check_unconfined(args.host, builds_enabled=settings.allow_builds)
        if workers > 1:
            from analyst_env.envs.backends import make_backend
            from analyst_env.envs.local.probe import export_verdicts

            make_backend(settings).close()
            export_verdicts()  # the workers take these verdicts instead of probing again
    except fail_closed.Refusal as refusal:
        return refusal.line
    return ""


def _start_backend(settings):
    """Make the sandbox backend and, given a core to spare, start warming it on a thread,
    before the server's imports.

    The local zygote imports pandas, numpy and duckdb in its own process (about a
    second) while this one imports openenv and fastapi (about a second): with a core
    free the two overlap. Where every core has a server process of its own importing
    (``serve --workers N`` with N the cores, the default) a zygote booting now only
    slows the imports that ``/health`` waits for, so the warm-up is left to the app's
    startup hook, which starts it without waiting for it (``server/lifecycle.py``;
    ``/ready`` does wait). Errors are left to that hook too (it warms again: a no-op
    once warm), which reports them and stops the server (``warm_up_refusal``).
    """
    import os
    import threading

    from analyst_env.envs.backends import make_backend
    from analyst_env.envs.capabilities import warm_up
    from analyst_env.server.peers import COUNT_ENV
    from analyst_env.server.workers import cores_available

    backend = make_backend(settings)
    if cores_available() <= int(os.environ.get(COUNT_ENV) or 1):
        return backend

    def warm() -> None:
        try:
            warm_up(backend)
        except Exception:  # reported by the app's startup hook
            pass

    threading.Thread(target=warm, name="backend-warm-up", daemon=True).start()
    return backend


def warm_up_refusal(backend, error: str) -> str:
    """The one line ``serve`` exits with (status 2) when the backend's warm-up failed: an image
    that cannot be served (a build the vendor rejected, an unreachable service, a zygote
    that did not boot). No episode ran meanwhile: a reset waits for the same warm-up."""
    reason = " ".join(error.split())
    return error_line(
        f"the {backend.name} sandbox backend could not warm up image 'default': {reason}"
    )


def _freeze_startup_heap() -> None:
    """Leave what start-up made (imported modules, the app, the task catalogue) out of the
    cyclic garbage collector's scans for the rest of the process's life.

    A full collection otherwise walks every object the imports made (pandas, numpy, duckdb,
    openpyxl: several hundred thousand), tens of milliseconds each time, inside whichever
    reset or step happened to allocate last. On procedural generation the p99 went from
    158-185 ms to 112-122 ms (docs/benchmarks-history.md, "Procedural tasks: workbook templates").
    """
    import gc

    gc.collect()
    gc.freeze()


def _serve(args: argparse.Namespace, settings, runtime) -> int:
    import uvicorn

    from analyst_env.server.app import build_app
    from analyst_env.server.body_limit import MAX_MESSAGE_BYTES
    from analyst_env.server.same_origin import refuse_rebound_names

    app = build_app(settings, runtime=runtime)
    refuse_rebound_names(app, args.host, settings.token)  # no DNS-rebound page passes for it
    shown = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
    runtime = app.state.runtime
    count = "unbounded" if runtime.unbounded else len(runtime.tasks)
    print(f"analyst_env serving {count} task(s) from {settings.dataset!r}")
    if runtime.quarantined and not settings.serve_quarantined:
        print(
            f"  {len(runtime.quarantined)} of them quarantined (broken upstream gold): served by "
            "task_id only, never drawn (ANALYST_ENV_SERVE_QUARANTINED=1 draws them)"
        )
    if runtime.refused:
        print(
            f"  {len(runtime.refused)} of them refused: workbook tasks need formula recalculation "
            "and LibreOffice (soffice) is not installed (apt-get install libreoffice-calc-nogui)"
        )
    print(f"  URL:    http://{shown}:{args.port}   (WebSocket: ws://{shown}:{args.port}/ws)")
    print(f"  health: http://{shown}:{args.port}/health   docs: http://{shown}:{args.port}/docs")
    print(
        f"  web UI: http://{shown}:{args.port}/web   (tasks, play, live sessions, replay)",
        flush=True,
    )
    from analyst_env.server.drain import DrainingServer
    from analyst_env.server.json_logs import uvicorn_log_config

    log_config = uvicorn_log_config(settings.log_format) or uvicorn.config.LOGGING_CONFIG
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        ws_max_size=MAX_MESSAGE_BYTES,
        log_config=log_config,
    )
    server = DrainingServer(config, app.state.sockets, settings.drain_timeout_s)
    warm_up = app.state.warm_up  # not awaited at startup: its failure stops the server here
    warm_up.on_failure = lambda: server.handle_exit(signal.SIGTERM, None)
    _freeze_startup_heap()
    if args.listen_fd is None:
        server.run()  # SIGTERM drains, then returns
    else:  # a worker of `serve --workers N`: accept on the supervisor's socket
        from analyst_env.server.peers import Peers
        from analyst_env.server.workers import inherited_socket

        sockets = [inherited_socket(args.listen_fd)]
        siblings = Peers.from_env()
        if siblings is not None:  # and on its own Unix socket, where its siblings ask
            sockets.append(siblings.listen())
        server.run(sockets=sockets)
    if warm_up.status == "failed":
        print(warm_up_refusal(runtime.backend, warm_up.error), file=sys.stderr, flush=True)
        return USAGE_STATUS
    return 0


def add_serve_parser(sub) -> None:
    """Register ``serve`` on the top-level subparsers."""
    serve = sub.add_parser(
        "serve",
        help="Serve the environment over OpenEnv's protocol",
        description="Serve the environment over OpenEnv's protocol (/ws, /mcp, HTTP, /web).\n"
        "A flag left out falls back to its ANALYST_ENV_* variable, then to the default shown.",
    )
    serve.add_argument("--host", default="127.0.0.1", help="Bind address")
    serve.add_argument("--port", type=int, default=8000, help="TCP port")
    serve.add_argument(
        "--dataset",
        help=DATASET_HELP + "; several, comma-separated, are served together (default: starter)",
    )
    serve.add_argument(
        "--curriculum",
        type=float,
        metavar="TARGET",
        help="Keep each client's success rate near TARGET (0..1) by choosing procedural depth",
    )
    serve.add_argument(
        "--max-sessions", type=int, help="Concurrent sessions, per worker (default 64)"
    )
    serve.add_argument(
        "--cell-timeout", type=float, help="Per-cell time limit in seconds (default 30)"
    )
    serve.add_argument(
        "--output-limit",
        type=int,
        help="Tool output cut at this many characters (default 20000)",
    )
    serve.add_argument(
        "--backend",
        help="Sandbox backend (default local; `analyst-env backends` lists each and its needs)",
    )
    serve.add_argument(
        "--token", help="Require 'Authorization: Bearer TOKEN' on every route but /health"
    )
    serve.add_argument(
        "--insecure", action="store_true", help="Allow a non-loopback bind without a token"
    )
    serve.add_argument(
        "--allow-builds",
        action="store_true",
        help="Allow /envs to create and build sandbox environments without a token",
    )
    serve.add_argument(
        "--isolation",
        choices=["auto", "full", "userns", "landlock", "none"],
        help="Local sandbox isolation (default auto: the strongest that works here, never none; "
        "none only on loopback, without builds)",
    )
    serve.add_argument(
        "--per-process-limits",
        action="store_true",
        help="Serve where per-episode cgroups cannot be written, with per-process memory "
        "limits instead (otherwise such a host refuses to start)",
    )
    serve.add_argument(
        "--log-level",
        default="info",
        type=str.lower,
        choices=["critical", "error", "warning", "info", "debug", "trace"],
        help="uvicorn's log level",
    )
    serve.add_argument(
        "--workers",
        type=int,
        default=None,
        help="Server processes sharing the port, each with its own sandboxes "
        "and --max-sessions (default: one per available core, up to 8; docs/operations.md)",
    )
    serve.add_argument("--listen-fd", type=int, help=argparse.SUPPRESS)  # set for workers
    serve.set_defaults(func=cmd_serve)
