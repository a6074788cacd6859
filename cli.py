"""The ``analyst-env`` command: ``serve``, ``tasks`` and ``eval``.

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
    )


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from analyst_env.server.app import build_app

    settings = _settings(args)
    if not _is_loopback(args.host) and not settings.token and not args.insecure:
        print(
            f"error: refusing to serve on non-loopback address {args.host!r} without a token. "
            "Set --token (or ANALYST_ENV_TOKEN), or pass --insecure to serve openly.",
            file=sys.stderr,
        )
        return 2
    app = build_app(settings)
    shown = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
    print(f"analyst_env serving {len(app.state.runtime.tasks)} task(s) from {settings.dataset!r}")
    print(f"  URL:    http://{shown}:{args.port}   (WebSocket: ws://{shown}:{args.port}/ws)")
    print(f"  health: http://{shown}:{args.port}/health   docs: http://{shown}:{args.port}/docs", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, ws_max_size=100 * 2**20)
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


def cmd_bench(args: argparse.Namespace) -> int:
    from analyst_env.client.benchmark import format_markdown, run_benchmark

    headers = {"Authorization": f"Bearer {args.token}"} if args.token else None

    def run(url: str) -> dict[str, Any]:
        return asyncio.run(run_benchmark(url, args.task_id, n=args.n, sessions=args.sessions, headers=headers))

    if args.url:
        results = run(args.url)
    else:
        from analyst_env.client.local_server import BackgroundServer
        from analyst_env.server.app import build_app

        with BackgroundServer(build_app(_settings(args))) as url:
            results = run(url)
    print(format_markdown(results))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)
    return 0


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

    bench = sub.add_parser("bench", help="Measure latency and throughput over the protocol")
    bench.add_argument("--url", help="Benchmark this server (default: start one in-process)")
    bench.add_argument("--dataset", help="Dataset for the in-process server (default: starter)")
    bench.add_argument("--task-id", default="starter-sales-000", help="Task every episode resets into")
    bench.add_argument("--n", type=int, default=100, help="Samples per measurement")
    bench.add_argument("--sessions", type=int, default=8, help="Concurrent sessions for throughput")
    bench.add_argument("--json", help="Also write the raw results here")
    bench.add_argument("--token", help="Bearer token for --url")
    bench.set_defaults(func=cmd_bench)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
