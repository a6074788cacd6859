"""``analyst-env datasets``: get a benchmark's data into the folder its loader reads.

``datasets list`` names the benchmarks, where to clone each from and its license;
``datasets prepare NAME CLONE [--out DIR]`` checks an upstream clone (or a folder
already prepared), builds the loader's folder, loads it once, and prints the
``--dataset`` spec to pass to ``serve``, ``eval`` or ``validate`` with the license
the data comes under. Every mistake is one ``error:`` line and exit code 2.
"""

from __future__ import annotations

import argparse
import sys


def add_parser(sub) -> None:
    ds = sub.add_parser(
        "datasets",
        help="List the benchmarks the loaders read, and prepare one from its upstream clone",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = ds.add_subparsers(dest="datasets_command", required=True)
    actions.add_parser("list", help="Each benchmark: upstream repository and license").set_defaults(
        func=run_list
    )
    prep = actions.add_parser(
        "prepare",
        help="Check an upstream clone and build the folder the loader reads",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    prep.add_argument("name", help="Benchmark name (see `analyst-env datasets list`)")
    prep.add_argument("clone", help="Path to the upstream clone (or an already prepared folder)")
    prep.add_argument(
        "--out", default=None, help="Folder to build (default: ./NAME); must be empty or absent"
    )
    prep.set_defaults(func=run_prepare)


def run_list(args: argparse.Namespace) -> int:
    from analyst_env.datasets.prepare import SOURCES

    for source in SOURCES.values():
        print(f"{source.name:<13} {source.upstream}\n{'':<13} license: {source.license}")
    return 0


def run_prepare(args: argparse.Namespace) -> int:
    from analyst_env.datasets.prepare import PrepareError, prepare

    try:
        done = prepare(args.name, args.clone, args.out)
    except PrepareError as exc:
        print(f"analyst-env: error: {exc}", file=sys.stderr)
        return 2
    verb = "prepared" if done.copied else "checked"
    left_out = f"; {done.left_out} upstream tasks left out (files absent)" if done.left_out else ""
    held = f", {done.quarantined} quarantined (validate says why)" if done.quarantined else ""
    print(f"{verb} {done.source.name} at {done.path}: {done.tasks} tasks{held}{left_out}")
    print(f"license: {done.source.license}")
    print(f"use it as: --dataset {done.spec}")
    return 0
