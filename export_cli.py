"""``analyst-env export``: tasks as Harbor task directories, recorded episodes as notebooks
or SFT records, and worked solutions of procedural tasks as SFT records.

``export sft`` replays each task's worked solution (built from a procedural task's plan, or read
from a frozen set's ``solutions.jsonl``) against a live server (one
started in-process, or ``--url``) and keeps only the trajectories that scored
1.0 (``evaluation/solution_replay.py``); the dropped ones are named.

``export harbor`` skips quarantined tasks (a broken upstream gold) unless asked, and
bundles the grader into each task (``trainers/harbor_export.py``); ``export
trajectories`` reads the server's state directory (``trainers/trajectory_export.py``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from analyst_env.cli_checks import (
    DATASET_HELP,
    UsageError,
    check_dataset,
    check_input_path,
    check_server,
    error_line,
    settings_from_args,
)


def cmd_export(args: argparse.Namespace) -> int:
    """``export harbor`` (task directories), ``export trajectories`` (notebooks or SFT
    records) and ``export sft`` (worked solutions, replayed)."""
    if args.what == "sft":
        return cmd_export_sft(args)
    if args.what == "harbor":
        from analyst_env.datasets import load_dataset
        from analyst_env.trainers.harbor_export import export as export_harbor

        check_dataset(args.dataset)
        check_input_path(args.wheelhouse, "--wheelhouse", folder=True)
        if args.grader_requirement and args.grader_requirement.endswith(".whl"):
            check_input_path(args.grader_requirement, "--grader-requirement")
        try:
            dataset = load_dataset(args.dataset)
            if dataset.unbounded:
                raise ValueError("it is unbounded; freeze a range first (analyst-env generate)")
            tasks = dataset.tasks
        except (ValueError, OSError) as exc:
            raise UsageError(f"cannot load dataset {args.dataset!r}: {exc}") from None
        tasks = [t for t in tasks if args.split is None or t.split == args.split]
        held = [] if args.include_quarantined else [t for t in tasks if t.quarantine_reason]
        tasks = [t for t in tasks if args.include_quarantined or not t.quarantine_reason]
        tasks = tasks[: args.limit]
        if held:
            print(
                f"skipped {len(held)} quarantined task(s) (broken upstream gold; "
                "--include-quarantined exports them)",
                file=sys.stderr,
            )
        try:
            dirs = export_harbor(
                tasks,
                args.out,
                grader_requirement=args.grader_requirement,
                base_image=args.base_image,
                wheelhouse=args.wheelhouse,
            )
        except (RuntimeError, OSError) as exc:
            raise UsageError(exc) from None
        print(f"wrote {len(dirs)} Harbor task(s) to {args.out}/tasks")
        return 0
    from analyst_env.trainers.trajectory_export import export as export_trajectories
    from analyst_env.trainers.trajectory_export import trajectory_files

    check_input_path(args.state_dir, "--state-dir", folder=True)
    state_dir = args.state_dir or settings_from_args(args).state_dir
    if not trajectory_files(state_dir):
        print(error_line(f"no trajectories under {state_dir}/trajectories"), file=sys.stderr)
        return 1
    written = export_trajectories(state_dir, args.format, args.out)
    print(f"wrote {len(written)} file(s) to {args.out}")
    return 0


def cmd_export_sft(args: argparse.Namespace) -> int:
    """``export sft --dataset procedural:SEED --count N`` (solutions built from each task's plan)
    or ``--dataset tasks:DIR`` (the ``solutions.jsonl`` that ``generate --with-solutions``
    wrote): replayed worked solutions as JSONL."""
    import asyncio
    import json

    from tqdm import tqdm

    from analyst_env.evaluation import solution_replay

    check_dataset(args.dataset)
    spec = args.dataset.strip()
    if not spec.startswith(("procedural:", "tasks:")):
        raise UsageError(
            "export sft needs --dataset procedural:SEED or tasks:DIR (tasks with worked solutions)"
        )
    if (args.count is not None and args.count < 1) or args.start < 0 or args.concurrency < 1:
        raise UsageError("--count and --concurrency must be at least 1 and --start at least 0")
    if args.url:
        check_server(args.url, args.token)
    if spec.startswith("procedural:"):
        dataset, tasks = _procedural_range(args)
        solve: solution_replay.Solver = solution_replay.solution_for
    else:
        dataset, tasks, solve = _frozen_range(args, Path(spec.removeprefix("tasks:")))
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else None
    bar = tqdm(total=len(tasks), desc=f"export sft {args.dataset}", unit="task", file=sys.stderr)

    def run(url: str) -> list[dict]:
        return asyncio.run(
            solution_replay.replay_many(
                url,
                tasks,
                headers=headers,
                style=args.style,
                concurrency=args.concurrency,
                on_result=lambda _: bar.update(1),
                solve=solve,
            )
        )

    if args.url:
        rows, seconds = solution_replay.timed(lambda: run(args.url))
    else:
        from analyst_env.server.local_server import serving

        settings = settings_from_args(args)
        with serving(settings, sessions=args.concurrency + 2, datasets=[dataset]) as url:
            rows, seconds = solution_replay.timed(lambda: run(url))
    bar.close()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    kept = [json.dumps(r["record"], ensure_ascii=False) for r in rows if "record" in r]
    (out / "sft.jsonl").write_text("".join(line + "\n" for line in kept), encoding="utf-8")
    result = solution_replay.summary(rows, seconds)
    for drop in result["dropped"]:
        print(
            f"  dropped {drop['task_id']}: reward {drop['reward']} {drop['error']}", file=sys.stderr
        )
    if args.json:
        print(json.dumps(result, sort_keys=True))
    else:
        uncovered = sum(result["uncovered_by_category"].values())
        print(
            f"wrote {result['kept']} trajectories to {out / 'sft.jsonl'}: {result['replayed']} "
            f"replayed, {len(result['dropped'])} dropped (reward below 1.0), {uncovered} without "
            f"a solution yet ({', '.join(result['uncovered_by_category']) or 'none'}); "
            f"{result['trajectories_per_s']} trajectories/s"
        )
    return 1 if result["dropped"] else 0


def _procedural_range(args: argparse.Namespace) -> tuple[Any, list[Any]]:
    """The dataset and tasks ``start .. start + count - 1`` of a procedural split, made now."""
    from analyst_env.datasets import load_dataset
    from analyst_env.datasets.procedural.dataset import KEEP_DIRS

    if args.count is None:
        raise UsageError("export sft --dataset procedural:SEED needs --count")
    try:
        dataset = load_dataset(args.dataset)
    except (ValueError, OSError) as exc:
        raise UsageError(f"cannot load dataset {args.dataset!r}: {exc}") from None
    if args.split not in dataset.splits():
        raise UsageError(f"no split {args.split!r}; splits: {', '.join(dataset.splits())}")
    dataset.keep_at_least(args.count + KEEP_DIRS)  # each plan is read after its task is made
    return dataset, [dataset.task(args.split, args.start + i) for i in range(args.count)]


def _frozen_range(args: argparse.Namespace, folder: Path) -> tuple[Any, list[Any], Any]:
    """The dataset, the split's tasks from ``start`` (``count`` of them, or all) and their
    written solutions, of a frozen task directory."""
    from analyst_env.datasets import load_dataset
    from analyst_env.datasets.procedural.solution_files import FrozenSolutions

    if args.style:
        raise UsageError("--style is for procedural:SEED; a frozen set keeps its written style")
    try:
        dataset = load_dataset(args.dataset)
        frozen = FrozenSolutions(folder)
    except (ValueError, OSError) as exc:
        raise UsageError(f"cannot load dataset {args.dataset!r}: {exc}") from None
    split = [t for t in dataset.tasks if t.split == args.split]
    if not split:
        splits = sorted({t.split for t in dataset.tasks})
        raise UsageError(f"no split {args.split!r}; splits: {', '.join(splits)}")
    end = None if args.count is None else args.start + args.count
    return dataset, split[args.start : end], frozen.solution_for


def add_export_parser(sub) -> None:
    """Register ``export harbor|trajectories|sft`` on the top-level subparsers."""
    export = sub.add_parser(
        "export", help="Export tasks for Harbor, recorded trajectories, or worked solutions (SFT)"
    )
    what = export.add_subparsers(dest="what", required=True)
    harbor = what.add_parser(
        "harbor", help="One Harbor task directory per task, graded by our scorer"
    )
    harbor.add_argument("--dataset", required=True, help=DATASET_HELP)
    harbor.add_argument("--out", required=True, help="Output directory (tasks/ is written inside)")
    harbor.add_argument("--split", help="Only this split")
    harbor.add_argument("--limit", type=int, help="Only the first N tasks")
    harbor.add_argument(
        "--include-quarantined",
        action="store_true",
        help="also export tasks quarantined for a broken upstream gold (metadata gold_status)",
    )
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
    traj.add_argument(
        "--format",
        required=True,
        choices=["ipynb", "sft"],
        help="ipynb: one notebook per episode; sft: chat records for supervised fine-tuning",
    )
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
    sft = what.add_parser(
        "sft",
        help="Worked solutions of procedural tasks, replayed on a live server, as SFT chat records",
    )
    sft.add_argument(
        "--dataset",
        required=True,
        help="procedural:SEED, or tasks:DIR made by generate --with-solutions",
    )
    sft.add_argument(
        "--count", type=int, help="How many tasks (needed for procedural; tasks:DIR: all)"
    )
    sft.add_argument("--split", default="train", help="Split to draw from (default train)")
    sft.add_argument("--start", type=int, default=0, help="First index of the split (default 0)")
    sft.add_argument(
        "--style",
        choices=["pandas", "mixed", "sql"],
        help="One solution style for every task (default: each task's own, drawn from its id)",
    )
    sft.add_argument("--out", default="sft-export", help="Output directory (sft.jsonl inside)")
    sft.add_argument("--url", help="Replay against this server (default: start one in-process)")
    sft.add_argument("--token", help="Bearer token for --url")
    sft.add_argument("--concurrency", type=int, default=4, help="Replays in flight (default 4)")
    sft.add_argument("--json", action="store_true", help="Print the summary as one JSON object")
    sft.set_defaults(func=cmd_export)
