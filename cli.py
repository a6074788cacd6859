"""The ``analyst-env`` command: ``serve``, ``tasks``, ``eval``, ``validate``, ``bench``, ``soak``,
``export``, ``generate``, ``datasets`` and ``envs``.

``analyst-env serve`` needs no configuration: local sandboxes, the shipped
``starter`` tasks, loopback only. Every flag has an ``ANALYST_ENV_*``
environment-variable twin (see ``server/settings.py``).

This module is the entry point (``main``, the ``analyst-env`` console script) and the
top-level parser, with the server-side commands (``serve``, ``tasks``, ``bench``,
``soak``). The commands that play or ship tasks (``eval``, ``validate``, ``export``) are
in ``eval_cli.py``, ``envs`` in ``envs_cli.py``, ``generate`` in
``datasets/procedural/cli.py`` and ``datasets`` in ``datasets/prepare_cli.py``; each
registers its own subparsers. A mistake on the command line is answered before anything
starts, with one ``analyst-env: error:`` line and status 2 (``cli_checks.py``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys

from analyst_env.cli_checks import (
    DATASET_HELP,
    USAGE_STATUS,
    Parser,
    UsageError,
    check_backend,
    check_dataset,
    check_output_file,
    check_port,
    error_line,
    missing_extra,
    settings_from_args,
)
from analyst_env.eval_cli import add_eval_parsers, add_export_parser

DESCRIPTION = """\
An RL environment server for data-analyst agents, speaking OpenEnv's protocol.

'serve' runs the server (local sandboxes, the shipped tasks, loopback only, no
configuration needed); 'tasks' lists datasets and their tasks; 'eval' plays a model or
a scripted policy over a dataset; 'validate' checks that every task of a dataset is
sound; 'generate' freezes procedural tasks into a folder; 'export' writes tasks for
Harbor or recorded episodes as notebooks; 'envs' manages a server's sandbox
environments; 'bench' and 'soak' measure and stress a server. Every 'serve' flag has an
ANALYST_ENV_* environment variable twin (docs/configuration.md)."""


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
    from analyst_env.envs.sandbox import SandboxError

    try:
        backend = _start_backend(settings)
    except (
        ValueError,
        SandboxError,
    ) as exc:  # unknown backend; SDK, credentials or service missing; a fail-closed refusal
        print(getattr(exc, "line", None) or error_line(exc), file=sys.stderr, flush=True)
        return USAGE_STATUS
    info = backend.protections()
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
    """Make the sandbox backend and start warming it on a thread, before the server's imports.

    The local zygote imports pandas, numpy and duckdb in its own process (about a
    second) while this one imports openenv and fastapi (about a second): on two
    cores the two overlap. Errors are left to the app's startup, which warms the
    backend again (a no-op once warm) and reports them.
    """
    import threading

    from analyst_env.envs.backends import make_backend

    backend = make_backend(settings)

    def warm() -> None:
        try:
            backend.warm_up()
        except Exception:  # reported by the app's startup hook
            pass

    threading.Thread(target=warm, name="backend-warm-up", daemon=True).start()
    return backend


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

    app = build_app(settings, runtime=runtime)
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
        ws_max_size=100 * 2**20,
        log_config=log_config,
    )
    server = DrainingServer(config, app.state.sockets, settings.drain_timeout_s)
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
    return 0


def cmd_tasks(args: argparse.Namespace) -> int:
    from analyst_env.datasets import load_dataset
    from analyst_env.datasets.registry import known_datasets

    if args.dataset is None:
        known = known_datasets()
        print("Shipped sets:   " + ", ".join(known["shipped"]))
        print(
            "Loader formats: "
            + ", ".join(f"{f}:{'DIR' if f == 'tasks' else 'PATH'}" for f in known["formats"])
        )
        print("Generated:      procedural:SEED (SEED an integer, e.g. procedural:7)")
        print("Show the tasks of one with: analyst-env tasks --dataset NAME")
        return 0
    check_dataset(args.dataset)
    try:
        dataset = load_dataset(args.dataset)
    except (ValueError, OSError) as exc:
        raise UsageError(f"cannot load dataset {args.dataset!r}: {exc}") from None
    if args.split is not None and args.split not in dataset.splits():
        raise UsageError(
            f"no split {args.split!r} in {args.dataset}; splits: {', '.join(dataset.splits())}"
        )
    if args.limit is not None and args.limit < 1:
        raise UsageError(f"--limit must be at least 1, got {args.limit}")
    if dataset.unbounded:  # made on demand: show the first few of each split
        splits = [args.split] if args.split else dataset.splits()
        tasks = [dataset.task(s, i) for s in splits for i in range(args.limit or 10)]
    else:
        tasks = [t for t in dataset.tasks if args.split is None or t.split == args.split]
    if args.json:
        print(json.dumps([t.public_view() for t in tasks], indent=2))
        return 0
    for t in tasks:
        kind = t.metadata.get("kind", "")
        first_line = t.instruction.strip().splitlines()[0] if t.instruction.strip() else ""
        print(f"{t.id:<28} {t.split:<6} {kind:<7} {first_line[:80]}")
    print(f"{len(tasks)} task(s) shown; splits: {', '.join(dataset.splits())}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from analyst_env.benchmarks.run import BenchConfig, format_markdown, run_bench

    check_output_file(args.json)
    jupyter = not (args.no_jupyter or args.burst_only)
    if args.burst_only and args.import_only:
        raise UsageError("--burst-only and --import-only measure different figures: pick one")
    if jupyter and importlib.util.find_spec("jupyter_client") is None:
        raise UsageError(
            "the Jupyter baseline needs the optional package 'jupyter_client': "
            "pip install 'analyst-env[dev]' (or pass --no-jupyter)"
        )
    cfg = BenchConfig.quick() if args.quick else BenchConfig()
    cfg.include_jupyter = not args.no_jupyter
    cfg.burst_only = args.burst_only
    cfg.import_only = args.import_only
    report = run_bench(cfg, log=lambda msg: print(msg, file=sys.stderr, flush=True))
    print(format_markdown(report))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=2)
    return 0


def cmd_soak(args: argparse.Namespace) -> int:
    from analyst_env.benchmarks.soak import SoakConfig, run_soak

    check_output_file(args.json)
    cfg = SoakConfig(
        sessions=args.sessions,
        minutes=args.minutes,
        seed=args.seed,
        max_rss_growth_pct=args.max_rss_growth,
    )
    report = run_soak(cfg, log=lambda msg: print(msg, file=sys.stderr, flush=True))
    print(json.dumps(report, indent=2))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=2)
    return 0 if report["ok"] else 1


def package_version() -> str:
    """The installed distribution's version, else the package's own (a source tree on
    ``PYTHONPATH`` has no distribution metadata)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("analyst-env")
    except PackageNotFoundError:
        from analyst_env import __version__

        return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="analyst-env", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

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
        help="Sandbox backend: local, docker, modal, e2b or opensandbox (default local)",
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

    tasks = sub.add_parser("tasks", help="List datasets, or the tasks of one")
    tasks.add_argument("--dataset", help=DATASET_HELP + " (default: list the datasets)")
    tasks.add_argument("--split", help="Only this split (default: all)")
    tasks.add_argument("--json", action="store_true", help="Print the public task specs as JSON")
    tasks.add_argument(
        "--limit", type=int, help="Tasks per split shown for an unbounded set (default 10)"
    )
    tasks.set_defaults(func=cmd_tasks)

    add_eval_parsers(sub)  # eval, validate

    bench = sub.add_parser(
        "bench",
        help="Measure analyst_env against a Jupyter kernel per episode and the protocol floor",
    )
    bench.add_argument("--json", help="Also write the figures here, as JSON")
    bench.add_argument(
        "--quick", action="store_true", help="Tiny samples: a smoke test, not a measurement"
    )
    bench.add_argument("--no-jupyter", action="store_true", help="Skip the Jupyter-kernel baseline")
    bench.add_argument(
        "--burst-only",
        action="store_true",
        help="Only the burst figures (256 sessions at once), with the protocol floor",
    )
    bench.add_argument(
        "--import-only",
        action="store_true",
        help="Only the client import figure (each target's client imported in fresh "
        "interpreters, the median kept); starts no server",
    )
    bench.set_defaults(func=cmd_bench)

    soak = sub.add_parser(
        "soak", help="Drive random valid and invalid actions on many sessions, then check for leaks"
    )
    soak.add_argument("--sessions", type=int, default=100, help="Concurrent clients (default 100)")
    soak.add_argument("--minutes", type=float, default=10.0, help="How long to soak (default 10)")
    soak.add_argument("--seed", type=int, default=0, help="Seed of the random actions (default 0)")
    soak.add_argument(
        "--max-rss-growth",
        type=float,
        default=5.0,
        help="Fail if the server's RSS grew more than this many percent (default 5)",
    )
    soak.add_argument("--json", help="Also write the report here")
    soak.set_defaults(func=cmd_soak)

    add_export_parser(sub)  # export harbor|trajectories

    from analyst_env.datasets.prepare_cli import add_parser as add_datasets_parser
    from analyst_env.datasets.procedural.cli import add_parser as add_generate_parser
    from analyst_env.envs_cli import add_parser as add_envs_parser

    add_generate_parser(sub)  # generate --count N --seed S --out DIR
    add_datasets_parser(sub)  # datasets list|prepare NAME CLONE
    add_envs_parser(sub)  # envs list|show|create|build|delete
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; a mistake on its command line is one ``analyst-env: error:`` line and
    status 2, whichever command and whichever check found it."""
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # serve --workers re-runs it
    try:
        return args.func(args)
    except UsageError as exc:
        print(error_line(exc), file=sys.stderr, flush=True)
        return USAGE_STATUS
    except ModuleNotFoundError as exc:  # an optional extra that is not installed
        line = missing_extra(exc)
        if line is None:
            raise
        print(line, file=sys.stderr, flush=True)
        return USAGE_STATUS


if __name__ == "__main__":
    sys.exit(main())
