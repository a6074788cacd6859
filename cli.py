"""The ``analyst-env`` command: ``serve``, ``tasks``, ``eval``, ``validate``, ``bench`` and
``envs``.

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
    if args.workers < 1:
        print(f"error: --workers must be at least 1, got {args.workers}", file=sys.stderr)
        return 2
    if args.workers > 1:  # a supervisor: the workers make their own backends
        from analyst_env.server.workers import supervise

        serve_args = args.argv[args.argv.index("serve") + 1 :]
        return supervise(serve_args, args.host, args.port, args.workers)
    from analyst_env.envs.sandbox import SandboxError

    try:
        backend = _start_backend(settings)
    except (
        ValueError,
        SandboxError,
    ) as exc:  # unknown backend; SDK, credentials or service missing
        print(f"error: {exc}", file=sys.stderr)
        return 2
    info = backend.protections()
    if info:  # the mode in force, named before anything is served
        line = (
            f"analyst-env: sandbox backend {backend.name}, isolation {info.get('isolation', '?')}"
        )
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

    def warm() -> None:
        try:
            backend.warm_up()
        except Exception:  # reported by the app's startup hook
            pass

    threading.Thread(target=warm, name="backend-warm-up", daemon=True).start()
    return backend


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
    if args.listen_fd is None:
        server.run()  # SIGTERM drains, then returns
    else:  # a worker of `serve --workers N`: accept on the supervisor's socket
        from analyst_env.server.workers import inherited_socket

        server.run(sockets=[inherited_socket(args.listen_fd)])
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
    if getattr(dataset, "unbounded", False):  # made on demand: show the first few of each split
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


def cmd_eval(args: argparse.Namespace) -> int:
    """``eval``: a model (or the oracle/null policy) over a dataset; report, HTML and run log."""
    from tqdm import tqdm

    from analyst_env.client.chat_client import ChatError
    from analyst_env.client.eval_run import EvalSettings, run_eval, select_tasks
    from analyst_env.client.run_log import RunMismatch, runs_dir
    from analyst_env.datasets import load_dataset

    settings = EvalSettings(
        dataset=args.dataset,
        policy=args.policy,
        model=args.model,
        model_url=args.model_url,
        api_key_env=args.api_key_env,
        tool_format=args.tool_format,
        samples=args.samples,
        temperature=args.temperature,
        top_p=args.top_p,
        max_tokens=args.max_tokens,
        seed=args.seed,
        max_turns=args.max_turns,
        token_budget=args.token_budget,
        split=args.split,
        limit=args.limit,
        concurrency=args.concurrency,
        request_timeout_s=args.request_timeout,
        retries=args.retries,
        retry_backoff_s=args.retry_backoff,
        run_name=args.run_name,
        fresh=args.fresh,
        include_quarantined=args.include_quarantined,
        runs_dir=args.runs_dir or str(runs_dir(_settings(args).state_dir)),
    )
    try:
        settings.check()
        dataset = load_dataset(args.dataset)
        if getattr(dataset, "unbounded", False):
            raise ValueError(
                f"{args.dataset!r} is unbounded; freeze a range first "
                "(analyst-env generate ... --out DIR) and evaluate tasks:DIR"
            )
        tasks = select_tasks(dataset.tasks, args.split, args.limit, args.include_quarantined)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else None
    who = args.model or args.policy
    bar = tqdm(
        total=len(tasks) * args.samples, desc=f"{who} on {args.dataset}", unit="ep", file=sys.stderr
    )
    tally = {"n": 0, "solved": 0, "reward": 0.0}

    def progress(row: dict[str, Any]) -> None:
        tally["n"] += 1
        tally["solved"] += row["reward"] >= 1.0
        tally["reward"] += row["reward"]
        bar.set_postfix(
            acc=f"{tally['solved'] / tally['n']:.3f}",
            reward=f"{tally['reward'] / tally['n']:.3f}",
            refresh=False,
        )
        bar.update(1)

    def run(url: str):
        return asyncio.run(
            run_eval(
                settings,
                tasks,
                url,
                headers=headers,
                on_result=progress,
                on_start=bar.update,
                json_path=args.json,
            )
        )

    try:
        if args.url:
            result, run_dir = run(args.url)
        else:
            from analyst_env.client.local_server import BackgroundServer
            from analyst_env.server.app import build_app

            served = _settings(args).model_copy(update={"max_sessions": args.concurrency + 2})
            with BackgroundServer(build_app(served)) as url:
                result, run_dir = run(url)
    except (RunMismatch, ChatError, ValueError) as exc:
        bar.close()
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        bar.close()
        print(
            f"interrupted: the {tally['n']} episode(s) finished in this run are kept in its log "
            f"under {settings.runs_dir}; run the same command again to resume",
            file=sys.stderr,
        )
        return 130
    bar.close()
    for task in [t for t in result["tasks"] if "error" in t][:10]:
        print(f"  {task['task_id']}: {task['error']}", file=sys.stderr)
    pass_k = " ".join(f"pass@{k}={v:.4f}" for k, v in result["pass_at_k"].items())
    print(
        f"{who} on {args.dataset}: n={result['n']} mean_reward={result['mean_reward']:.4f} "
        f"{pass_k} errors={result['errors']}"
    )
    print(f"run {result['run_id']}: {run_dir}/report.html", file=sys.stderr)
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    """``validate DATASET``: table and summary on stdout; exit 1 if any task fails a check."""
    from tqdm import tqdm

    from analyst_env.client.validation import (
        format_probes,
        format_table,
        report,
        summary,
        validate,
    )
    from analyst_env.datasets import load_dataset

    if args.concurrency < 1:
        print(f"error: --concurrency must be at least 1, got {args.concurrency}", file=sys.stderr)
        return 2
    try:
        dataset = load_dataset(args.dataset)
    except (ValueError, OSError) as exc:
        print(f"error: cannot load dataset {args.dataset!r}: {exc}", file=sys.stderr)
        return 2
    generation = None
    if getattr(dataset, "unbounded", False):
        from analyst_env.datasets.procedural.validate_sample import sample_for_validation

        tasks, generation = sample_for_validation(dataset, args.split, args.start, args.sample)
    else:
        tasks = dataset.tasks
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else None
    bar = tqdm(total=len(tasks), desc=f"validate {args.dataset}", unit="task", file=sys.stderr)

    def run(url: str) -> list[dict[str, Any]]:
        return asyncio.run(
            validate(
                url,
                tasks,
                concurrency=args.concurrency,
                headers=headers,
                on_result=lambda _: bar.update(1),
            )
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
    if generation is not None:
        result["generation"] = generation
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)
    print(format_table(rows))
    for failure in result["failed"]:
        print(
            f"  FAIL {failure['task_id']} [{failure['check']}]: {failure['reason']}",
            file=sys.stderr,
        )
    for broken in result["broken_upstream"]:
        print(f"  broken upstream {broken['task_id']}: {broken['gold_status']}", file=sys.stderr)
    print(format_probes(result))
    print(summary(result))
    if generation is not None:
        print(f"generation: {json.dumps(generation, sort_keys=True)}")
        if generation["nondeterministic"]:
            return 1
    return 1 if result["failed"] else 0


def cmd_export(args: argparse.Namespace) -> int:
    """``export harbor`` (task directories) and ``export trajectories`` (notebooks or SFT
    records)."""
    if args.what == "harbor":
        from analyst_env.client.harbor_export import export
        from analyst_env.datasets import load_dataset

        try:
            dataset = load_dataset(args.dataset)
            if getattr(dataset, "unbounded", False):
                raise ValueError("it is unbounded; freeze a range first (analyst-env generate)")
            tasks = dataset.tasks
        except (ValueError, OSError) as exc:
            print(f"error: cannot load dataset {args.dataset!r}: {exc}", file=sys.stderr)
            return 2
        tasks = [t for t in tasks if args.split is None or t.split == args.split][: args.limit]
        try:
            dirs = export(
                tasks,
                args.out,
                grader_requirement=args.grader_requirement,
                base_image=args.base_image,
                wheelhouse=args.wheelhouse,
            )
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="analyst-env", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="Serve the environment over OpenEnv's protocol")
    serve.add_argument("--host", default="127.0.0.1", help="Bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--dataset", help="Shipped set name or FORMAT:PATH (default: starter)")
    serve.add_argument("--max-sessions", type=int, help="Concurrent sessions (default 64)")
    serve.add_argument(
        "--cell-timeout", type=float, help="Per-cell time limit in seconds (default 30)"
    )
    serve.add_argument("--output-limit", type=int, help="Tool output cut at this many characters")
    serve.add_argument("--backend", help="Sandbox backend (default local)")
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
    serve.add_argument("--log-level", default="info")
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        help="Server processes sharing the port, each with its own sandboxes "
        "and --max-sessions (default 1; docs/operations.md)",
    )
    serve.add_argument("--listen-fd", type=int, help=argparse.SUPPRESS)  # set for workers
    serve.set_defaults(func=cmd_serve)

    tasks = sub.add_parser("tasks", help="List datasets, or the tasks of one")
    tasks.add_argument("--dataset", help="Shipped set name or FORMAT:PATH")
    tasks.add_argument("--split")
    tasks.add_argument("--json", action="store_true", help="Print the public task specs as JSON")
    tasks.add_argument(
        "--limit", type=int, help="Tasks per split shown for an unbounded set (default 10)"
    )
    tasks.set_defaults(func=cmd_tasks)

    ev = sub.add_parser("eval", help="Evaluate a model (or the oracle/null policy) on a dataset")
    ev.add_argument("--dataset", required=True, help="Shipped set name or FORMAT:PATH")
    who = ev.add_mutually_exclusive_group(required=True)
    who.add_argument("--policy", choices=["oracle", "null"], help="A scripted policy")
    who.add_argument("--model", help="The model name sent to --model-url")
    ev.add_argument("--model-url", help="OpenAI-compatible endpoint base, e.g. http://host:8000/v1")
    ev.add_argument("--api-key-env", help="Environment variable holding the endpoint's API key")
    ev.add_argument(
        "--tool-format",
        default="auto",
        choices=["auto", "native", "text"],
        help="native tool calls, the text <tool_call> form, or auto (probe)",
    )
    ev.add_argument("--samples", type=int, default=1, help="Episodes per task, for pass@k")
    ev.add_argument("--temperature", type=float)
    ev.add_argument("--top-p", type=float)
    ev.add_argument("--max-tokens", type=int, help="Completion tokens per reply")
    ev.add_argument("--seed", type=int, help="Sampling seed (sent to the endpoint) and reset seed")
    ev.add_argument("--max-turns", type=int, default=20, help="Replies per episode (default 20)")
    ev.add_argument("--token-budget", type=int, help="Completion tokens per episode")
    ev.add_argument("--split", help="Only this split")
    ev.add_argument("--limit", type=int, help="Only the first N tasks")
    ev.add_argument("--url", help="Evaluate against this server (default: start one in-process)")
    ev.add_argument("--token", help="Bearer token for --url")
    ev.add_argument("--json", help="Also write the report here (and the HTML report beside it)")
    ev.add_argument("--concurrency", type=int, default=8, help="Episodes in flight (default 8)")
    ev.add_argument(
        "--request-timeout",
        type=float,
        default=300.0,
        help="Seconds per model request (default 300)",
    )
    ev.add_argument("--retries", type=int, default=4, help="Retries of a 429, 5xx or timeout")
    ev.add_argument(
        "--retry-backoff",
        type=float,
        default=1.0,
        help="First retry wait in seconds, doubled each retry (default 1)",
    )
    ev.add_argument("--runs-dir", help="Where runs live (default: <state_dir>/runs)")
    ev.add_argument("--run-name", help="Name the run (default: derived from its settings)")
    ev.add_argument("--fresh", action="store_true", help="Start the run over instead of resuming")
    ev.add_argument(
        "--include-quarantined",
        action="store_true",
        help="Also play upstream tasks whose gold is known to be broken (skipped by default)",
    )
    ev.set_defaults(func=cmd_eval)

    va = sub.add_parser(
        "validate", help="Check every task: oracle scores 1, null 0, the same twice, no gold leaks"
    )
    va.add_argument("dataset", help="Shipped set name or FORMAT:PATH")
    va.add_argument("--url", help="Validate against this server (default: start one in-process)")
    va.add_argument("--json", help="Write the report here")
    va.add_argument("--concurrency", type=int, default=8, help="Tasks in flight (default 8)")
    va.add_argument("--token", help="Bearer token for --url")
    va.add_argument(
        "--sample", type=int, default=100, help="Tasks checked of an unbounded set (default 100)"
    )
    va.add_argument(
        "--split", default="train", help="Split sampled of an unbounded set (default train)"
    )
    va.add_argument(
        "--start", type=int, default=0, help="First index sampled of an unbounded set (default 0)"
    )
    va.set_defaults(func=cmd_validate)

    bench = sub.add_parser(
        "bench",
        help="Measure analyst_env against a Jupyter kernel per episode and the protocol floor",
    )
    bench.add_argument("--json", help="Write the figures here")
    bench.add_argument(
        "--quick", action="store_true", help="Tiny samples: a smoke test, not a measurement"
    )
    bench.add_argument("--no-jupyter", action="store_true", help="Skip the Jupyter-kernel baseline")
    bench.add_argument(
        "--burst-only",
        action="store_true",
        help="Only the burst figures (256 sessions at once), with the protocol floor",
    )
    bench.set_defaults(func=cmd_bench)

    soak = sub.add_parser(
        "soak", help="Drive random valid and invalid actions on many sessions, then check for leaks"
    )
    soak.add_argument("--sessions", type=int, default=100, help="Concurrent clients (default 100)")
    soak.add_argument("--minutes", type=float, default=10.0, help="How long to soak (default 10)")
    soak.add_argument("--seed", type=int, default=0, help="Seed of the random actions")
    soak.add_argument(
        "--max-rss-growth",
        type=float,
        default=5.0,
        help="Fail if the server's RSS grew more than this many percent (default 5)",
    )
    soak.add_argument("--json", help="Write the report here")
    soak.set_defaults(func=cmd_soak)

    export = sub.add_parser("export", help="Export tasks for Harbor, or recorded trajectories")
    what = export.add_subparsers(dest="what", required=True)
    harbor = what.add_parser(
        "harbor", help="One Harbor task directory per task, graded by our scorer"
    )
    harbor.add_argument("--dataset", required=True, help="Shipped set name or FORMAT:PATH")
    harbor.add_argument("--out", required=True, help="Output directory (tasks/ is written inside)")
    harbor.add_argument("--split", help="Only this split")
    harbor.add_argument("--limit", type=int, help="Only the first N tasks")
    harbor.add_argument(
        "--grader-requirement",
        default=None,
        help="the grader bundled into each task's tests/: a local wheel (copied in) or a pip "
        "requirement (installed at verification; needs network). Default: a wheel built from the "
        "running package",
    )
    harbor.add_argument(
        "--base-image",
        default="python:3.11-slim",
        help="the image each task's Dockerfile builds FROM (default python:3.11-slim; "
        "e.g. the local tag deploy/image/base.sh makes where Docker Hub is out of reach)",
    )
    harbor.add_argument(
        "--wheelhouse",
        default=None,
        help="a folder of wheels for the image's packages: copied into each task's build "
        "context and installed from there only (no package index at build time)",
    )
    harbor.set_defaults(func=cmd_export)
    traj = what.add_parser(
        "trajectories", help="Recorded episodes as notebooks (ipynb) or SFT chat records (sft)"
    )
    traj.add_argument("--format", required=True, choices=["ipynb", "sft"])
    traj.add_argument(
        "--out",
        default="trajectories-export",
        help="Output directory (default trajectories-export)",
    )
    traj.add_argument(
        "--state-dir",
        help="The server's state directory (default: ANALYST_ENV_STATE_DIR or the cache)",
    )
    traj.set_defaults(func=cmd_export)

    from analyst_env.datasets.procedural.cli import add_parser as add_generate_parser
    from analyst_env.envs_cli import add_parser as add_envs_parser

    add_generate_parser(sub)  # generate --count N --seed S --out DIR
    add_envs_parser(sub)  # envs list|show|create|build|delete
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # serve --workers re-runs it
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
