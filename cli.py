"""The ``analyst-env`` command: ``serve``, ``tasks``, ``eval``, ``validate``, ``bench`` and ``envs``.

``analyst-env serve`` needs no configuration: local sandboxes, the shipped
``starter`` tasks, loopback only. Every flag has an ``ANALYST_ENV_*``
environment-variable twin (see ``server/settings.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import sys
from typing import Any

LOOPBACK_NAMES = {"localhost", "ip6-localhost"}


def _is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _settings(args: argparse.Namespace):
    from analyst_env.server.settings import Settings

    return Settings.from_env(
        dataset=getattr(args, "dataset", None),
        max_sessions=getattr(args, "max_sessions", None),
        cell_timeout_s=getattr(args, "cell_timeout", None),
        output_limit_chars=getattr(args, "output_limit", None),
        backend=getattr(args, "backend", None),
        token=getattr(args, "token", None),
        allow_builds=getattr(args, "allow_builds", None) or None,
    )


def cmd_serve(args: argparse.Namespace) -> int:
    settings = _settings(args)
    if not _is_loopback(args.host) and not settings.token and not args.insecure:
        print(
            f"error: refusing to serve on non-loopback address {args.host!r} without a token. "
            "Set --token (or ANALYST_ENV_TOKEN), or pass --insecure to serve openly.",
            file=sys.stderr,
        )
        return 2
    from analyst_env.envs.sandbox import SandboxError

    try:
        backend = _start_backend(settings)
    except (ValueError, SandboxError) as exc:  # unknown backend; SDK, credentials or service missing
        print(f"error: {exc}", file=sys.stderr)
        return 2
    protections = getattr(backend, "protections", None)
    if protections is not None:  # the mode in force, named before anything is served
        info = protections()
        line = f"analyst-env: sandbox backend {backend.name}, isolation {info.get('isolation', '?')}"
        for key in ("degraded", "stronger_modes_unavailable"):
            if info.get(key):
                line += f"; {key.replace('_', ' ')}: {info[key]}"
        print(line, file=sys.stderr, flush=True)
    try:
        from analyst_env.server.runtime import Runtime

        runtime = Runtime(settings, backend=backend)
    except BaseException:
        backend.close()
        raise
    try:
        return _serve(args, settings, runtime)
    finally:
        runtime.close()


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
    warm_up = getattr(backend, "warm_up", None)
    if warm_up is not None:

        def warm() -> None:
            try:
                warm_up()
            except Exception:  # reported by the app's startup hook
                pass

        threading.Thread(target=warm, name="backend-warm-up", daemon=True).start()
    return backend


def _serve(args: argparse.Namespace, settings, runtime) -> int:
    import uvicorn

    from analyst_env.server.app import build_app

    app = build_app(settings, runtime=runtime)
    shown = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
    print(f"analyst_env serving {len(app.state.runtime.tasks)} task(s) from {settings.dataset!r}")
    print(f"  URL:    http://{shown}:{args.port}   (WebSocket: ws://{shown}:{args.port}/ws)")
    print(f"  health: http://{shown}:{args.port}/health   docs: http://{shown}:{args.port}/docs")
    print(f"  web UI: http://{shown}:{args.port}/web   (tasks, play, live sessions, replay)", flush=True)
    from analyst_env.server.drain import DrainingServer

    config = uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level, ws_max_size=100 * 2**20)
    DrainingServer(config, app.state.sockets, settings.drain_timeout_s).run()  # SIGTERM drains, then returns
    return 0


def cmd_tasks(args: argparse.Namespace) -> int:
    from analyst_env.datasets import load_dataset
    from analyst_env.datasets.registry import known_datasets

    if args.dataset is None:
        known = known_datasets()
        print("Shipped sets:   " + ", ".join(known["shipped"]))
        print("Loader formats: " + ", ".join(f"{f}:PATH" for f in known["formats"]))
        print("Show the tasks of one with: analyst-env tasks --dataset NAME")
        return 0
    dataset = load_dataset(args.dataset)
    tasks = [t for t in dataset.tasks if args.split is None or t.split == args.split]
    if args.json:
        print(json.dumps([t.public_view() for t in tasks], indent=2))
        return 0
    for t in tasks:
        kind = t.metadata.get("kind", "")
        first_line = t.instruction.strip().splitlines()[0] if t.instruction.strip() else ""
        print(f"{t.id:<28} {t.split:<6} {kind:<7} {first_line[:80]}")
    print(f"{len(tasks)} task(s); splits: {', '.join(dataset.splits())}")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from analyst_env.client.evaluation import evaluate, report
    from analyst_env.datasets import load_dataset

    tasks = load_dataset(args.dataset).tasks
    if args.limit:
        tasks = tasks[: args.limit]
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else None
    bar = tqdm(total=len(tasks), desc=f"{args.policy} on {args.dataset}", unit="task", file=sys.stderr)

    def progress(_row: dict[str, Any]) -> None:
        bar.update(1)

    def run(url: str) -> list[dict[str, Any]]:
        return asyncio.run(
            evaluate(url, tasks, args.policy, concurrency=args.concurrency, headers=headers, on_result=progress)
        )

    if args.url:
        rows = run(args.url)
    else:
        from analyst_env.client.local_server import BackgroundServer
        from analyst_env.server.app import build_app

        settings = _settings(args).model_copy(update={"max_sessions": max(args.concurrency, 1)})
        with BackgroundServer(build_app(settings)) as url:
            rows = run(url)
    bar.close()
    result = report(args.dataset, args.policy, rows)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)
    failed = [r for r in rows if "error" in r]
    for r in failed[:10]:
        print(f"  {r['task_id']}: {r['error']}", file=sys.stderr)
    print(f"{args.policy} on {args.dataset}: n={result['n']} mean_reward={result['mean_reward']:.4f} errors={len(failed)}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    """``validate DATASET``: table and summary on stdout; exit 1 if any task fails a check."""
    from tqdm import tqdm

    from analyst_env.client.validation import format_table, report, summary, validate
    from analyst_env.datasets import load_dataset

    if args.concurrency < 1:
        print(f"error: --concurrency must be at least 1, got {args.concurrency}", file=sys.stderr)
        return 2
    try:
        dataset = load_dataset(args.dataset)
    except (ValueError, OSError) as exc:
        print(f"error: cannot load dataset {args.dataset!r}: {exc}", file=sys.stderr)
        return 2
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else None
    bar = tqdm(total=len(dataset.tasks), desc=f"validate {args.dataset}", unit="task", file=sys.stderr)

    def run(url: str) -> list[dict[str, Any]]:
        return asyncio.run(
            validate(url, dataset.tasks, concurrency=args.concurrency, headers=headers, on_result=lambda _: bar.update(1))
        )

    if args.url:
        rows = run(args.url)
    else:
        from analyst_env.client.local_server import BackgroundServer
        from analyst_env.server.app import build_app
        from analyst_env.server.runtime import Runtime

        settings = _settings(args).model_copy(update={"max_sessions": args.concurrency + 4})
        runtime = Runtime(settings, datasets=[dataset])
        try:
            with BackgroundServer(build_app(settings, runtime=runtime)) as url:
                rows = run(url)
        finally:
            runtime.close()
    bar.close()
    result = report(args.dataset, rows)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)
    print(format_table(rows))
    for failure in result["failed"]:
        print(f"  FAIL {failure['task_id']} [{failure['check']}]: {failure['reason']}", file=sys.stderr)
    for broken in result["broken_upstream"]:
        print(f"  broken upstream {broken['task_id']}: {broken['gold_status']}", file=sys.stderr)
    print(summary(result))
    return 1 if result["failed"] else 0


def cmd_export(args: argparse.Namespace) -> int:
    """``export harbor`` (task directories) and ``export trajectories`` (notebooks or SFT records)."""
    if args.what == "harbor":
        from analyst_env.client.harbor_export import export
        from analyst_env.datasets import load_dataset

        try:
            tasks = load_dataset(args.dataset).tasks
        except (ValueError, OSError) as exc:
            print(f"error: cannot load dataset {args.dataset!r}: {exc}", file=sys.stderr)
            return 2
        tasks = [t for t in tasks if args.split is None or t.split == args.split][: args.limit]
        try:
            dirs = export(tasks, args.out, grader_requirement=args.grader_requirement)
        except (RuntimeError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"wrote {len(dirs)} Harbor task(s) to {args.out}/tasks")
        return 0
    from analyst_env.client.trajectory_export import export, trajectory_files

    state_dir = args.state_dir or _settings(args).state_dir
    if not trajectory_files(state_dir):
        print(f"error: no trajectories under {state_dir}/trajectories", file=sys.stderr)
        return 1
    written = export(state_dir, args.format, args.out)
    print(f"wrote {len(written)} file(s) to {args.out}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from analyst_env.benchmarks.run import BenchConfig, format_markdown, run_bench

    cfg = BenchConfig.quick() if args.quick else BenchConfig()
    cfg.include_jupyter = not args.no_jupyter
    cfg.burst_only = args.burst_only
    report = run_bench(cfg, log=lambda msg: print(msg, file=sys.stderr, flush=True))
    print(format_markdown(report))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=2)
    return 0


def cmd_soak(args: argparse.Namespace) -> int:
    from analyst_env.benchmarks.soak import SoakConfig, run_soak

    cfg = SoakConfig(sessions=args.sessions, minutes=args.minutes, seed=args.seed,
                     max_rss_growth_pct=args.max_rss_growth)
    report = run_soak(cfg, log=lambda msg: print(msg, file=sys.stderr, flush=True))
    print(json.dumps(report, indent=2))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=2)
    return 0 if report["ok"] else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="analyst-env", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="Serve the environment over OpenEnv's protocol")
    serve.add_argument("--host", default="127.0.0.1", help="Bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--dataset", help="Shipped set name or FORMAT:PATH (default: starter)")
    serve.add_argument("--max-sessions", type=int, help="Concurrent sessions (default 64)")
    serve.add_argument("--cell-timeout", type=float, help="Per-cell time limit in seconds (default 30)")
    serve.add_argument("--output-limit", type=int, help="Tool output cut at this many characters")
    serve.add_argument("--backend", help="Sandbox backend (default local)")
    serve.add_argument("--token", help="Require 'Authorization: Bearer TOKEN' on every route but /health")
    serve.add_argument("--insecure", action="store_true", help="Allow a non-loopback bind without a token")
    serve.add_argument("--allow-builds", action="store_true",
                       help="Allow /envs to create and build sandbox environments without a token")
    serve.add_argument("--log-level", default="info")
    serve.set_defaults(func=cmd_serve)

    tasks = sub.add_parser("tasks", help="List datasets, or the tasks of one")
    tasks.add_argument("--dataset", help="Shipped set name or FORMAT:PATH")
    tasks.add_argument("--split")
    tasks.add_argument("--json", action="store_true", help="Print the public task specs as JSON")
    tasks.set_defaults(func=cmd_tasks)

    ev = sub.add_parser("eval", help="Run a fixed policy over a dataset through the protocol")
    ev.add_argument("--dataset", required=True)
    ev.add_argument("--policy", required=True, choices=["oracle", "null"])
    ev.add_argument("--url", help="Evaluate against this server (default: start one in-process)")
    ev.add_argument("--json", help="Write the report here")
    ev.add_argument("--concurrency", type=int, default=8, help="Episodes in flight (default 8)")
    ev.add_argument("--limit", type=int, help="Only the first N tasks")
    ev.add_argument("--token", help="Bearer token for --url")
    ev.set_defaults(func=cmd_eval)

    va = sub.add_parser(
        "validate", help="Check every task: oracle scores 1, null 0, the same twice, no gold leaks"
    )
    va.add_argument("dataset", help="Shipped set name or FORMAT:PATH")
    va.add_argument("--url", help="Validate against this server (default: start one in-process)")
    va.add_argument("--json", help="Write the report here")
    va.add_argument("--concurrency", type=int, default=8, help="Tasks in flight (default 8)")
    va.add_argument("--token", help="Bearer token for --url")
    va.set_defaults(func=cmd_validate)

    bench = sub.add_parser(
        "bench", help="Measure analyst_env against a Jupyter kernel per episode and the protocol floor"
    )
    bench.add_argument("--json", help="Write the figures here")
    bench.add_argument("--quick", action="store_true", help="Tiny samples: a smoke test, not a measurement")
    bench.add_argument("--no-jupyter", action="store_true", help="Skip the Jupyter-kernel baseline")
    bench.add_argument("--burst-only", action="store_true",
                       help="Only the burst figures (256 sessions at once), with the protocol floor")
    bench.set_defaults(func=cmd_bench)

    soak = sub.add_parser(
        "soak", help="Drive random valid and invalid actions on many sessions, then check for leaks"
    )
    soak.add_argument("--sessions", type=int, default=100, help="Concurrent clients (default 100)")
    soak.add_argument("--minutes", type=float, default=10.0, help="How long to soak (default 10)")
    soak.add_argument("--seed", type=int, default=0, help="Seed of the random actions")
    soak.add_argument("--max-rss-growth", type=float, default=5.0,
                      help="Fail if the server's RSS grew more than this many percent (default 5)")
    soak.add_argument("--json", help="Write the report here")
    soak.set_defaults(func=cmd_soak)

    export = sub.add_parser("export", help="Export tasks for Harbor, or recorded trajectories")
    what = export.add_subparsers(dest="what", required=True)
    harbor = what.add_parser("harbor", help="One Harbor task directory per task, graded by our scorer")
    harbor.add_argument("--dataset", required=True, help="Shipped set name or FORMAT:PATH")
    harbor.add_argument("--out", required=True, help="Output directory (tasks/ is written inside)")
    harbor.add_argument("--split", help="Only this split")
    harbor.add_argument("--limit", type=int, help="Only the first N tasks")
    harbor.add_argument(
        "--grader-requirement", default=None,
        help="the grader bundled into each task's tests/: a local wheel (copied in) or a pip requirement "
        "(installed at verification; needs network). Default: a wheel built from the running package",
    )
    harbor.set_defaults(func=cmd_export)
    traj = what.add_parser("trajectories", help="Recorded episodes as notebooks (ipynb) or SFT chat records (sft)")
    traj.add_argument("--format", required=True, choices=["ipynb", "sft"])
    traj.add_argument("--out", default="trajectories-export", help="Output directory (default trajectories-export)")
    traj.add_argument("--state-dir", help="The server's state directory (default: ANALYST_ENV_STATE_DIR or the cache)")
    traj.set_defaults(func=cmd_export)

    from analyst_env.envs.recipes.cli import add_parser as add_envs_parser

    add_envs_parser(sub)  # envs list|show|create|build|delete
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
