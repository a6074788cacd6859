"""The ``analyst-env`` command: ``serve``, ``backends``, ``tasks``, ``eval``, ``validate``,
``bench``, ``soak``, ``export``, ``generate``, ``datasets`` and ``envs``.

``analyst-env serve`` needs no configuration: local sandboxes, the shipped
``starter`` tasks, loopback only. Every flag has an ``ANALYST_ENV_*``
environment-variable twin (see ``server/settings.py``).

This module is the entry point (``main``, the ``analyst-env`` console script) and the
top-level parser, with ``tasks``, ``bench`` and ``soak``. ``serve`` is in ``serve_cli.py``,
``backends`` in ``backends_cli.py``, the commands that play tasks (``eval``, ``validate``)
in ``eval_cli.py``, ``export`` in ``export_cli.py``, ``envs`` in ``envs_cli.py``, ``generate`` in
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
    check_dataset,
    check_output_file,
    error_line,
    missing_extra,
)
from analyst_env.eval_cli import add_eval_parsers
from analyst_env.export_cli import add_export_parser
from analyst_env.serve_cli import add_serve_parser

DESCRIPTION = """\
An RL environment server for data-analyst agents, speaking OpenEnv's protocol.

'serve' runs the server (local sandboxes, the shipped tasks, loopback only, no
configuration needed); 'backends' lists the sandbox backends and what each still needs;
'tasks' lists datasets and their tasks; 'eval' plays a model or
a scripted policy over a dataset; 'validate' checks that every task of a dataset is
sound; 'generate' freezes procedural tasks into a folder; 'export' writes tasks for
Harbor, recorded episodes as notebooks, or worked solutions (replayed) as SFT data; 'envs'
manages a server's sandbox environments; 'bench' and 'soak' measure and stress a server.
Every 'serve' flag has an ANALYST_ENV_* environment variable twin (docs/configuration.md)."""


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


def _progress(message: str) -> None:
    """A long measurement's progress line: on stderr, so stdout stays the report alone."""
    print(message, file=sys.stderr, flush=True)


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
    report = run_bench(cfg, log=_progress)
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
        warm_up_s=args.warm_up,
        settle_s=args.settle,
    )
    report = run_soak(cfg, log=_progress)
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

    add_serve_parser(sub)  # serve

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
    soak.add_argument(
        "--warm-up",
        type=float,
        default=None,
        metavar="SECONDS",
        help="Play episodes this long before the baseline is counted (default: a tenth of the "
        "run, 10 to 60 s; 0: the baseline is the idle server)",
    )
    soak.add_argument(
        "--settle",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="Longest wait for ended episodes to release what they held before the counts "
        "are compared (default 30)",
    )
    soak.add_argument("--json", help="Also write the report here")
    soak.set_defaults(func=cmd_soak)

    add_export_parser(sub)  # export harbor|trajectories

    from analyst_env.backends_cli import add_parser as add_backends_parser
    from analyst_env.datasets.prepare_cli import add_parser as add_datasets_parser
    from analyst_env.datasets.procedural.cli import add_parser as add_generate_parser
    from analyst_env.envs_cli import add_parser as add_envs_parser

    add_generate_parser(sub)  # generate --count N --seed S --out DIR
    add_datasets_parser(sub)  # datasets list|prepare NAME CLONE
    add_envs_parser(sub)  # envs list|show|create|build|delete
    add_backends_parser(sub)  # backends [--json]
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
